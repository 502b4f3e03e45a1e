"""The ``grid`` searcher: one trial per point of the hyperparameter grid.

As Determined's ``grid.go``: the first ``max_concurrent_trials`` points (all when 0) are created
at once (and as many more ahead with :meth:`~.TrackedSearch.allow_ahead`), each exit makes room
for the next point, and every point is tried exactly once (a point
whose trial errors or reports invalid hyperparameters is not retried). Validation metrics are not
read. Points are created in :class:`~stalwart.master.searcher.sampling.GridSpace` order, first
point first (Determined pops from the end of its list); the state is the index of the next point.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.master.searcher.actions import Action
from stalwart.master.searcher.base import ExitedReason, SearcherStateError, TrackedSearch
from stalwart.master.searcher.sampling import GridSpace

__all__ = ["GridSearch"]


class GridSearch(TrackedSearch):
    """Grid search over the cartesian product of every hyperparameter's grid values."""

    name = "grid"
    may_run_ahead = True
    replaces_invalid = False

    def __init__(
        self,
        hyperparameters: Mapping[str, Hyperparameter],
        seed: int,
        *,
        max_concurrent_trials: int,
    ) -> None:
        super().__init__(hyperparameters, seed)
        if max_concurrent_trials < 0:
            raise ValueError("max_concurrent_trials must be >= 0")
        self._grid = GridSpace(hyperparameters)
        self._next = 0
        self._cap = min(max_concurrent_trials, len(self._grid)) if max_concurrent_trials else 0

    @property
    def max_concurrent_trials(self) -> int:
        return self._cap

    @property
    def grid_size(self) -> int:
        """How many trials the search runs."""
        return len(self._grid)

    def _fill(self) -> list[Action]:
        actions: list[Action] = []
        limit = self.live_limit()
        while self._next < len(self._grid) and not (limit and self.live_trials() >= limit):
            actions.append(self._create(self._grid.point(self._next)))
            self._next += 1
        return actions

    def _initial(self) -> list[Action]:
        return self._fill()

    def _exited(self, request_id: str, reason: ExitedReason | None) -> list[Action]:
        return self._fill()

    def _planned_trials(self) -> int:
        return len(self._grid)

    def _state(self) -> dict[str, Any]:
        return {"next_point": self._next, "grid_size": len(self._grid)}

    def _load(self, state: Mapping[str, Any]) -> None:
        if state["grid_size"] != len(self._grid):
            raise SearcherStateError(
                f"grid: the snapshot's grid has {state['grid_size']} points, the config's "
                f"{len(self._grid)}"
            )
        self._next = int(state["next_point"])
