"""The ``random`` searcher: ``max_trials`` trials with independently sampled hyperparameters.

As Determined's ``random.go``: the first ``min(max_trials, max_concurrent_trials)`` trials are
created at once (all of them when ``max_concurrent_trials`` is 0), and each exit makes room for
the next until ``max_trials`` have been created; with :meth:`~.TrackedSearch.allow_ahead`, up to
``max_concurrent_trials`` more are created ahead of those exits (Stalwart's queued
successors). A trial that reports invalid hyperparameters does not count: it is replaced by a
new sample. Errored trials count (they are not retried here; the
master already restarted them ``max_restarts`` times). Validation metrics are not read.
"""

from __future__ import annotations

from collections.abc import Mapping

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.master.searcher.actions import Action
from stalwart.master.searcher.base import ExitedReason, TrackedSearch
from stalwart.master.searcher.sampling import sample_hyperparameters

__all__ = ["RandomSearch"]


class RandomSearch(TrackedSearch):
    """Random search (also the engine of :class:`~stalwart.master.searcher.single.SingleSearch`)."""

    name = "random"
    may_run_ahead = True

    def __init__(
        self,
        hyperparameters: Mapping[str, Hyperparameter],
        seed: int,
        *,
        max_trials: int,
        max_concurrent_trials: int,
    ) -> None:
        super().__init__(hyperparameters, seed)
        if max_trials < 1 or max_concurrent_trials < 0:
            raise ValueError("max_trials must be >= 1 and max_concurrent_trials >= 0")
        self._max_trials = max_trials
        self._cap = min(max_concurrent_trials, max_trials) if max_concurrent_trials else 0

    @property
    def max_concurrent_trials(self) -> int:
        return self._cap

    def _counted(self) -> int:
        """Trials created so far that count against ``max_trials``."""
        return self.created_trials() - (self.invalid_trials() if self.replaces_invalid else 0)

    def _fill(self) -> list[Action]:
        actions: list[Action] = []
        counted = self._counted()
        limit = self.live_limit()
        while counted < self._max_trials and not (limit and self.live_trials() >= limit):
            actions.append(self._create(sample_hyperparameters(self._hps, self._rng)))
            counted += 1
        return actions

    def _initial(self) -> list[Action]:
        return self._fill()

    def _exited(self, request_id: str, reason: ExitedReason | None) -> list[Action]:
        return self._fill()

    def _planned_trials(self) -> int:
        return self._max_trials
