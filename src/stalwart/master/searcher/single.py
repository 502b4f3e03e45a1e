"""The ``single`` searcher: one trial.

As Determined (a random search with ``max_trials: 1``, one at a time): the hyperparameters are
sampled once (constants as given, ranges drawn with the experiment seed). A trial that reports
invalid hyperparameters is not replaced; the experiment then ends.

A finished single-trial experiment may be continued (``det e continue``): the master calls
:meth:`SingleSearch.continue_trial` and the same trial runs again; its next exit ends the search
once more.
"""

from __future__ import annotations

from collections.abc import Mapping

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.master.searcher.base import SearcherStateError
from stalwart.master.searcher.random_search import RandomSearch

__all__ = ["SingleSearch"]


class SingleSearch(RandomSearch):
    """Exactly one trial."""

    name = "single"
    replaces_invalid = False

    def __init__(self, hyperparameters: Mapping[str, Hyperparameter], seed: int) -> None:
        super().__init__(hyperparameters, seed, max_trials=1, max_concurrent_trials=1)

    def continue_trial(self, request_id: str) -> None:
        """The master continues the experiment: trial ``request_id`` runs again.

        Whether the search had heard of its exit or not (a canceled or killed experiment's
        trial never reports one), the trial is live again, not stopped, with no exit reason and
        no progress, and the search is no longer shut down: the trial's next exit shuts it down
        again, as its first did. Raises SearcherStateError for an unknown request id.
        """
        trial = self._trials.get(request_id)
        if trial is None:
            raise SearcherStateError(f"{self.name}: no trial with request id {request_id!r}")
        if not trial.live:
            trial.live = True
            self._live[trial.group] = self._live.get(trial.group, 0) + 1
            if trial.reason is not None and trial.reason.invalid_hp:
                self._invalid[trial.group] = max(self._invalid.get(trial.group, 0) - 1, 0)
        trial.stopped = False
        trial.reason = None
        trial.progress = 0.0
        self._started = True
        self._shut = False
