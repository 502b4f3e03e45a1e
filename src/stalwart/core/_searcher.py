"""``SearcherContext``: Determined 0.38's deprecated searcher shim (wire doc 6).

Contract:

- ``operations()`` talks to no one: it warns (:class:`FutureWarning`, as Determined) and yields
  one :class:`SearcherOperation` whose ``length`` is ``searcher.max_length`` of the experiment
  config (an int, or the value of a one-key dict such as ``{"batches": 100}``). The caller must
  ``report_completed`` it before asking for the next (there is none).
- ``op.report_progress(length)`` reports ``min(1, length / op.length)`` as the trial's progress;
  ``op.report_completed(metric)`` only marks the op done (the searcher reads validation metrics).
- Without ``searcher.max_length`` the context is :class:`SearcherContextMissing`, whose methods
  raise Determined's "SearcherContext was not created ..." :class:`ValueError`.
- :class:`LocalSearcherContext` (off-cluster) yields one op of length 1 and only logs.
"""

from __future__ import annotations

import enum
import logging
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from stalwart.core._distributed import DistributedContext

__all__ = [
    "LocalSearcherContext",
    "SearcherContext",
    "SearcherContextMissing",
    "SearcherMode",
    "SearcherOperation",
    "Unit",
    "parse_max_length",
    "parse_units",
]

logger = logging.getLogger("stalwart.core")

_DEPRECATED = (
    "SearcherContext.operations() was deprecated in Determined 0.38.0 and will be removed in a "
    "future version.  Instead, you should set your training length directly in your training "
    "code."
)
_MISSING = (
    "SearcherContext was not created because your experiment config does not have the "
    "searcher.max_length set.  Both the searcher.max_length and the SearcherContext are "
    "deprecated.  Instead, you should specify your training length directly in your training "
    "code and avoid all calls to core_context.searcher."
)


class Unit(enum.Enum):
    """The unit a ``searcher.max_length`` dict names."""

    EPOCHS = "EPOCHS"
    RECORDS = "RECORDS"
    BATCHES = "BATCHES"


class SearcherMode(enum.Enum):
    """Whether every worker calls ``operations()`` in step, or only the chief."""

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHEIF_ONLY"  # sic: Determined's value


def parse_max_length(config: Mapping[str, Any]) -> int | None:
    """``searcher.max_length`` as an int (None when unset or empty)."""
    value = (config.get("searcher") or {}).get("max_length")
    if isinstance(value, Mapping):
        value = next(iter(value.values()), None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"searcher.max_length must be an int or a one-key dict, got {value!r}")
    return value


def parse_units(config: Mapping[str, Any]) -> Unit | None:
    """The unit of ``searcher.max_length`` (``searcher.unit`` first), or None."""
    searcher = config.get("searcher") or {}
    names = {"records": Unit.RECORDS, "epochs": Unit.EPOCHS, "batches": Unit.BATCHES}
    if "unit" in searcher:
        return names.get(str(searcher["unit"]))
    length = searcher.get("max_length")
    if isinstance(length, Mapping) and len(length) == 1:
        return names.get(str(next(iter(length))))
    return None


class SearcherOperation:
    """One unit of work: train up to ``length``, validate, ``report_completed``."""

    def __init__(
        self, length: int, is_chief: bool, report_progress: Callable[[float], None]
    ) -> None:
        self._length = length
        self._is_chief = is_chief
        self._post_progress = report_progress
        self._completed = False

    @property
    def length(self) -> int:
        """The total training length (in the unit of ``searcher.max_length``)."""
        return self._length

    def report_progress(self, length: float) -> None:
        """Report training done so far, in the unit of :attr:`length` (chief only)."""
        if not self._is_chief:
            raise RuntimeError("you must only call op.report_progress() from the chief worker")
        if self._completed and length != self._length:
            raise RuntimeError("you must not call op.report_progress() after op.report_completed()")
        progress = min(1.0, max(0.0, length / self._length)) if self._length else 1.0
        self._post_progress(progress)

    def report_completed(self, searcher_metric: Any) -> None:
        """Mark the operation done (chief only, once); nothing is sent."""
        if not self._is_chief:
            raise RuntimeError("you must only call op.report_completed() from the chief worker")
        if self._completed:
            raise RuntimeError("you may only call op.report_completed() once")
        self._completed = True


class SearcherContext:
    """The shim over ``searcher.max_length`` (see the module contract)."""

    def __init__(
        self,
        dist: DistributedContext,
        max_length: int,
        report_progress: Callable[[float], None],
        units: Unit | None = None,
    ) -> None:
        self._dist = dist
        self._length = max_length
        self._report_progress = report_progress
        self._units = units

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        """One operation (see the module contract)."""
        warnings.warn(_DEPRECATED, FutureWarning, stacklevel=2)
        mode = SearcherMode(searcher_mode)
        chief = self._dist.rank == 0
        if not chief and mode is not SearcherMode.WorkersAskChief:
            raise RuntimeError(
                "you cannot call searcher.operations(searcher_mode=ChiefOnly) from a non-chief "
                "worker."
            )
        length = self._dist.broadcast(self._length) if chief else self._dist.broadcast(None)
        op = SearcherOperation(length, chief, self._report_progress)
        yield op
        if chief and not op._completed:
            raise RuntimeError("you must call op.report_completed() on each operation")

    def acknowledge_out_of_ops(self) -> None:
        """Ignored (deprecated in 0.38)."""

    def get_configured_units(self) -> Unit | None:
        """The unit of ``searcher.max_length``, or None."""
        return self._units


class SearcherContextMissing(SearcherContext):
    """The config has no ``searcher.max_length``: every call raises Determined's error."""

    def __init__(self) -> None:
        pass

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        raise ValueError(_MISSING)

    def acknowledge_out_of_ops(self) -> None:
        raise ValueError(_MISSING)

    def get_configured_units(self) -> Unit | None:
        raise ValueError(_MISSING)


class LocalSearcherContext(SearcherContext):
    """Off-cluster twin: one operation of ``length`` (1 by default); progress is logged."""

    def __init__(self, dist: DistributedContext, length: int = 1) -> None:
        super().__init__(dist, length, self._log_progress, Unit.EPOCHS)

    def _log_progress(self, progress: float) -> None:
        logger.info("progress report: %s", progress)
