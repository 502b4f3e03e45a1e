"""What the SDK's objects over one master record share (:class:`Record`, :class:`NamedRecord`).

Such an object holds the session it came by and ``data``, the record as the master last sent
it; its methods replace ``data`` with the master's answer (:meth:`Record._patch_answer`).
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from stalwart.client.session import Session

__all__ = ["NamedRecord", "Record"]

D = TypeVar("D")
M = TypeVar("M", bound=BaseModel)


class _Named(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


class Record(Generic[D]):
    """An SDK object over one record (``data``: what the master said)."""

    def __init__(self, session: Session, data: D) -> None:
        self._session = session
        self.data = data

    def _patch_answer(self, path: str, body: Any, model: type[M]) -> M:
        """PATCH ``body`` to ``path``; the answer, validated with ``model``."""
        return model.model_validate(self._session.request("PATCH", path, body=body))


class NamedRecord(Record[N]):
    """A record with an ``id`` and a ``name``."""

    @property
    def id(self) -> int:
        return self.data.id

    @property
    def name(self) -> str:
        return self.data.name
