"""A checkpoint as the SDK sees it, and downloading its files.

Download contract: the files are read from the checkpoint storage named in the experiment's
config, through :mod:`stalwart.storage` (``shared_fs``/``directory``: the directory has to be
reachable from this machine, as on the agents; ``s3``/``gcs``/``azure``: the extra installed and
credentials in the environment). Only COMPLETED (or partially deleted) checkpoints have files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stalwart.client.models import V1Checkpoint
from stalwart.client.session import Progress
from stalwart.errors import FailedPreconditionError

__all__ = ["Checkpoint", "strip_state"]


def strip_state(state: str) -> str:
    """``STATE_COMPLETED`` -> ``COMPLETED`` (the SDK's and CLI's spelling)."""
    return state.removeprefix("STATE_")


class Checkpoint:
    """One checkpoint (``uuid``, ``state``, ``metadata``, ``resources``; ``data`` holds all)."""

    def __init__(self, data: V1Checkpoint) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"Checkpoint(uuid={self.uuid!r}, state={self.state!r})"

    @property
    def uuid(self) -> str:
        return self.data.uuid

    @property
    def state(self) -> str:
        """``COMPLETED``, ``DELETED``, ... (no ``STATE_`` prefix)."""
        return strip_state(self.data.state)

    @property
    def metadata(self) -> dict[str, Any]:
        return self.data.metadata

    @property
    def resources(self) -> dict[str, int]:
        """Relative path -> size in bytes (directories end in ``/``)."""
        return {path: int(size) for path, size in self.data.resources.items()}

    @property
    def size(self) -> int:
        """Total bytes of the checkpoint's files."""
        return sum(self.resources.values())

    @property
    def trial_id(self) -> int | None:
        return self.data.training.trial_id

    @property
    def experiment_id(self) -> int | None:
        return self.data.training.experiment_id

    @property
    def steps_completed(self) -> int | None:
        value = self.metadata.get("steps_completed")
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None

    def storage_config(self) -> dict[str, Any]:
        """The ``checkpoint_storage`` config the checkpoint was saved with."""
        config = (self.data.training.experiment_config or {}).get("checkpoint_storage")
        if not isinstance(config, Mapping):
            raise FailedPreconditionError(
                f"checkpoint {self.uuid} has no known checkpoint storage (no experiment config)"
            )
        return dict(config)

    def download(self, path: Path | None = None, progress: Progress | None = None) -> Path:
        """Copy the checkpoint's files into ``path`` (default ``checkpoints/<uuid>``); ``path``.

        ``progress(bytes done, bytes total)`` follows the copy. Raises FailedPreconditionError
        for a checkpoint without files, NotFoundError when the storage does not have it,
        :class:`~stalwart.storage.StorageError` subclasses for storage failures.
        """
        if self.state not in ("COMPLETED", "PARTIALLY_DELETED"):
            raise FailedPreconditionError(
                f"checkpoint {self.uuid} is {self.state}: only COMPLETED checkpoints have files"
            )
        # Imported here: storage pulls in fsspec and the config models.
        from stalwart.storage import Progress as Transfer
        from stalwart.storage import storage_from_config

        storage = storage_from_config(self.storage_config())
        dest = path if path is not None else Path("checkpoints") / self.uuid

        def report(step: Transfer) -> None:
            if progress is not None:
                progress(step.bytes_done, step.bytes_total)

        storage.download(self.uuid, dest, progress=report)
        return dest
