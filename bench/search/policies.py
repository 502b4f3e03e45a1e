"""Stalwart's own searchers as :class:`~bench.search.sim.Policy` objects (project venv only).

Both drive the master's real searcher classes (``stalwart.master.searcher``) exactly as the
master does: ``initial_actions()`` once, ``on_validation`` with the searcher metric and the time
metric, ``on_trial_exited`` once a trial no longer runs; ``Create`` actions queue trials for the
simulator, ``Stop`` actions stop them. The hyperparameters are ``x0..x{d-1}``, each a ``double``
in [0, 1].
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from bench.search.problems import MAX_EPOCHS, RUNG_EPOCHS, Vector
from stalwart.config.hyperparameters import DoubleHyperparameter, Hyperparameter
from stalwart.master.searcher.actions import Action, Create, Shutdown, Stop
from stalwart.master.searcher.asha import AsyncHalvingSearch
from stalwart.master.searcher.base import SearchMethod
from stalwart.master.searcher.random_search import RandomSearch

__all__ = ["SearcherPolicy", "stalwart_asha", "stalwart_random"]

METRIC = "loss"
TIME_METRIC = "epochs"


def _hyperparameters(dims: int) -> dict[str, Hyperparameter]:
    return {
        f"x{i}": DoubleHyperparameter(type="double", minval=0.0, maxval=1.0) for i in range(dims)
    }


class SearcherPolicy:
    """A Stalwart searcher behind the simulator's policy interface."""

    def __init__(self, searcher: SearchMethod, dims: int) -> None:
        self._searcher = searcher
        self._dims = dims
        self._pending: deque[tuple[str, Vector]] = deque()
        self._stopped: set[str] = set()
        self._apply(searcher.initial_actions())

    def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Create):
                x = np.array([float(action.hparams[f"x{i}"]) for i in range(self._dims)])
                self._pending.append((action.request_id, x))
            elif isinstance(action, Stop):
                self._stopped.add(action.request_id)
            elif isinstance(action, Shutdown):
                self._pending.clear()

    def new_trial(self) -> tuple[str, Vector] | None:
        return self._pending.popleft() if self._pending else None

    def report(self, trial_id: str, epoch: int, loss: float) -> bool:
        metrics: dict[str, Any] = {METRIC: loss, TIME_METRIC: epoch}
        self._apply(self._searcher.on_validation(trial_id, metrics))
        return trial_id in self._stopped

    def finished(self, trial_id: str) -> None:
        self._stopped.discard(trial_id)
        self._apply(self._searcher.on_trial_exited(trial_id))


def stalwart_random(dims: int, workers: int, max_trials: int, seed: int) -> SearcherPolicy:
    """Stalwart's ``random`` searcher: every trial trains ``MAX_EPOCHS`` epochs."""
    search = RandomSearch(
        _hyperparameters(dims), seed, max_trials=max_trials, max_concurrent_trials=workers
    )
    return SearcherPolicy(search, dims)


def stalwart_asha(dims: int, workers: int, max_trials: int, seed: int) -> SearcherPolicy:
    """Stalwart's ``async_halving`` searcher: rungs at RUNG_EPOCHS, divisor 3."""
    search = AsyncHalvingSearch(
        _hyperparameters(dims),
        seed,
        metric=METRIC,
        smaller_is_better=True,
        time_metric=TIME_METRIC,
        max_time=MAX_EPOCHS,
        num_rungs=len(RUNG_EPOCHS),
        divisor=3,
        max_trials=max_trials,
        max_concurrent_trials=workers,
    )
    return SearcherPolicy(search, dims)
