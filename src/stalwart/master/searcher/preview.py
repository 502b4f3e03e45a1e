"""What a searcher would create: Determined's ``PreviewHPSearch`` (``det preview-search``).

As Determined 0.38's ``searcher.Simulate``: ``single`` plans one trial, ``random`` its
``max_trials`` and ``grid`` one per grid point, each trained to completion (``max_length``
units). ``adaptive_asha`` splits ``max_trials`` over its brackets (as the searcher does) and,
rung by rung, counts the trials that stop there: of the ``n`` trials reaching a rung,
``max(int(n / divisor), 1)`` continue and the rest stop, and every trial reaching a bracket's top
rung stops there; the counts are summed per rung length and sorted by length. Stalwart previews
``async_halving`` the same way, as one bracket of ``num_rungs`` (Determined refuses it).

These are the planned trials. A searcher may create fewer (ASHA's early stopping) or,
for ``adaptive_asha`` with a tiny ``max_trials`` and many brackets, one more per bracket.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from stalwart.config import ExperimentConfig
from stalwart.config.searcher import (
    AdaptiveASHASearcher,
    AsyncHalvingSearcher,
    GridSearcher,
    RandomSearcher,
    SingleSearcher,
)
from stalwart.master.searcher.adaptive_asha import bracket_max_trials, bracket_rungs
from stalwart.master.searcher.asha import rung_units
from stalwart.master.searcher.factory import time_budget
from stalwart.master.searcher.sampling import GridSpace

__all__ = ["PlannedTrials", "preview_search"]


@dataclass(frozen=True)
class PlannedTrials:
    """``count`` trials that train for ``value`` units of ``unit`` (both None: to
    completion, Determined's ``maxLength``)."""

    count: int
    unit: str | None = None
    value: int | None = None


def _halving(
    brackets: list[tuple[int, int]], divisor: float, max_time: int, unit: str
) -> list[PlannedTrials]:
    """Trials stopping at each rung length, for ``(rungs, trials)`` brackets."""
    stopped: Counter[int] = Counter()
    for num_rungs, trials in brackets:
        reaching = trials
        units = rung_units(num_rungs, divisor, max_time)
        for i, rung in enumerate(units):
            going_on = max(int(reaching / divisor), 1)
            stopped[rung] += reaching if i == len(units) - 1 else reaching - going_on
            reaching = going_on
    return [PlannedTrials(count, unit, rung) for rung, count in sorted(stopped.items())]


def preview_search(config: ExperimentConfig) -> list[PlannedTrials]:
    """The trials ``config``'s searcher plans to create (ValueError for an ASHA searcher
    without a length)."""
    s = config.searcher
    if isinstance(s, SingleSearcher):
        return [PlannedTrials(1)]
    if isinstance(s, RandomSearcher):
        return [PlannedTrials(s.max_trials)]
    if isinstance(s, GridSearcher):
        return [PlannedTrials(len(GridSpace(config.hyperparameters)))]
    unit, max_time = time_budget(s)
    if isinstance(s, AsyncHalvingSearcher):
        return _halving([(s.num_rungs, s.max_trials)], s.divisor, max_time, unit)
    assert isinstance(s, AdaptiveASHASearcher)
    rungs = bracket_rungs(
        mode=s.mode,
        max_rungs=s.max_rungs,
        max_time=max_time,
        max_trials=s.max_trials,
        divisor=s.divisor,
        explicit=s.bracket_rungs,
    )
    trials = bracket_max_trials(s.max_trials, s.divisor, rungs)
    return _halving(list(zip(rungs, trials, strict=True)), s.divisor, max_time, unit)
