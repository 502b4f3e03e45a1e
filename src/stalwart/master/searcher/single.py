"""The ``single`` searcher: one trial.

As Determined (a random search with ``max_trials: 1``, one at a time): the hyperparameters are
sampled once (constants as given, ranges drawn with the experiment seed). A trial that reports
invalid hyperparameters is not replaced; the experiment then ends.

A finished single-trial experiment may be continued (``det e continue``): the master calls
:meth:`SingleSearch.continue_trial` and the same trial runs again; its next exit ends the search
once more. The search keeps its one trial's request id (``{"trial": request_id}`` in its state)
to recognise it after the exit, as its trial row is gone then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.master.searcher.actions import Create
from stalwart.master.searcher.base import SearcherStateError
from stalwart.master.searcher.random_search import RandomSearch

__all__ = ["SingleSearch"]


class SingleSearch(RandomSearch):
    """Exactly one trial."""

    name = "single"
    may_run_ahead = False  # one trial: nothing to create ahead
    replaces_invalid = False

    def __init__(self, hyperparameters: Mapping[str, Hyperparameter], seed: int) -> None:
        super().__init__(hyperparameters, seed, max_trials=1, max_concurrent_trials=1)
        self._trial_id: str | None = None

    def _create(self, hparams: dict[str, Any], group: int = 0) -> Create:
        create = super()._create(hparams, group)
        self._trial_id = create.request_id
        return create

    def continue_trial(self, request_id: str) -> None:
        """The master continues the experiment: trial ``request_id`` runs again.

        Whether the search had heard of its exit or not (a canceled or killed experiment's
        trial never reports one), the trial is live again, not stopped, with no exit reason and
        no progress, and the search is no longer shut down: the trial's next exit shuts it down
        again, as its first did. Raises SearcherStateError for an unknown request id.
        """
        if request_id != self._trial_id:
            raise SearcherStateError(f"{self.name}: no trial with request id {request_id!r}")
        trial = self._trials.get(request_id)
        if trial is None:  # it exited: take back its exit, the one exit counted
            [exit_key] = [key for key, n in self._group(0).exited.items() if n]
            trial = self._revive(request_id, 0, exit_key)
        trial.stopped = False
        trial.progress = 0.0
        self._started = True
        self._shut = False

    def _state(self) -> dict[str, Any]:
        return {"trial": self._trial_id}

    def _load(self, state: Mapping[str, Any]) -> None:
        trial = state["trial"]
        self._trial_id = None if trial is None else str(trial)

    def _load_v1(self, state: Mapping[str, Any], rows: list[list[Any]]) -> None:
        self._trial_id = str(rows[0][0]) if rows else None
