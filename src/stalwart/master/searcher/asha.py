"""The ``async_halving`` searcher (ASHA, early-stopping form) and the bracket it is made of.

As Determined 0.38's ``asha_stopping.go``:

- A bracket has ``num_rungs`` rungs; rung ``i`` needs ``max(int(max_time / divisor **
  (num_rungs - i - 1)), 1)`` units of ``time_metric`` (the top rung needs ``max_time``).
- Each validation carries the searcher metric and the time metric. Starting at the rung the
  trial is heading for, every rung whose units it has reached records its metric (ranked with
  the others there). A trial not in the top ``max(int(n / divisor), 1)`` of the ``n`` results of
  a rung so far gets :class:`~stalwart.master.searcher.actions.Stop`; a trial that reaches the top
  rung gets ``Stop`` too: it has trained ``max_time`` and completes.
- At most ``min(max_concurrent_trials, max_trials)`` trials run at once; with
  ``max_concurrent_trials: 0``, ``divisor ** (num_rungs - 1)`` clamped to ``[1, max_trials]``.
- A trial that errored or was canceled ranks last in the rung it was heading for; one with
  invalid hyperparameters is removed from every rung and does not count against ``max_trials``.

State: each rung keeps every result recorded there, ``[metric, request_id]``, exited trials'
included, because a promotion ranks a trial against all of them; the rungs are the one part of a
searcher snapshot that grows with the trials created (at most one entry per trial and rung).
Where each trial stands (``next_rung``) is kept for live trials only, and the counts of trials
created and exited come from :class:`~stalwart.master.searcher.base.TrackedSearch`.

Differences from Determined, on purpose: a replacement trial is created when a trial *exits*
(Determined creates it when it sends ``Stop``, so a stopping trial and its replacement overlap
and ``max_concurrent_trials`` is briefly exceeded); validations of a trial already stopped are
ignored (Determined would rank them again); and any exit makes room for the next trial, also a
trial that finished on its own before ``max_time`` (Determined would not replace it).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from stalwart.config.hyperparameters import Hyperparameter
from stalwart.master.searcher.actions import Action, Stop
from stalwart.master.searcher.base import (
    WORST_METRIC,
    ExitedReason,
    SearcherMetricError,
    TrackedSearch,
    read_number,
)
from stalwart.master.searcher.sampling import sample_hyperparameters

__all__ = ["AshaBracket", "AsyncHalvingSearch", "HalvingSearch", "rung_units"]


def _power(base: float, exponent: int) -> float:
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return math.inf


def rung_units(num_rungs: int, divisor: float, max_time: int) -> list[int]:
    """Units of the time metric each rung needs, lowest rung first."""
    return [max(int(max_time / _power(divisor, num_rungs - i - 1)), 1) for i in range(num_rungs)]


class AshaBracket:
    """One successive-halving ladder: rungs of ranked results and where each live trial stands.

    Metrics are stored "smaller is better" (the searcher negates them when bigger is better).
    ``rungs`` keep every result ever recorded (a promotion ranks a trial against all of them,
    exited trials included), so they grow with the trials that reached each rung; ``next_rung``
    holds the live trials only.
    """

    def __init__(
        self,
        *,
        num_rungs: int,
        divisor: float,
        max_time: int,
        max_trials: int,
        max_concurrent_trials: int,
    ) -> None:
        if num_rungs < 1 or max_trials < 1 or max_time < 1 or divisor <= 1:
            raise ValueError("num_rungs, max_trials, max_time >= 1 and divisor > 1 are required")
        self.num_rungs = num_rungs
        self.divisor = divisor
        self.max_trials = max_trials
        self.units = rung_units(num_rungs, divisor, max_time)
        if max_concurrent_trials > 0:
            self.cap = min(max_concurrent_trials, max_trials)
        else:
            width = _power(divisor, num_rungs - 1)
            self.cap = max(1, int(min(width, max_trials)))
        self.rungs: list[list[tuple[float, str]]] = [[] for _ in range(num_rungs)]
        self.next_rung: dict[str, int] = {}

    def add(self, request_id: str) -> None:
        """A new trial joined this bracket."""
        self.next_rung[request_id] = 0

    def _insert(self, rung: int, request_id: str, metric: float) -> int:
        results = self.rungs[rung]
        index = bisect_left(results, metric, key=lambda entry: entry[0])
        results.insert(index, (metric, request_id))
        return index

    def report(self, request_id: str, time: float, metric: float) -> bool:
        """Record a validation at ``time``; True when the trial must stop."""
        for rung in range(self.next_rung[request_id], self.num_rungs):
            self.next_rung[request_id] = rung
            if time < self.units[rung]:
                return False
            index = self._insert(rung, request_id, metric)
            if rung == self.num_rungs - 1:
                return True
            if index >= max(int(len(self.rungs[rung]) / self.divisor), 1):
                return True
        return False

    def ended_early(self, request_id: str) -> None:
        """An errored or canceled trial ranks last in the rung it was heading for."""
        self._insert(self.next_rung[request_id], request_id, WORST_METRIC)

    def exited(self, request_id: str) -> None:
        """The trial exited: its results stay in the rungs, its place on the ladder goes."""
        del self.next_rung[request_id]

    def invalid(self, request_id: str) -> None:
        """A trial with invalid hyperparameters leaves every rung."""
        for rung in range(self.next_rung[request_id] + 1):
            self.rungs[rung] = [e for e in self.rungs[rung] if e[1] != request_id]

    def state(self) -> dict[str, Any]:
        """JSON-ready state."""
        return {
            "rungs": [[[m, rid] for m, rid in results] for results in self.rungs],
            "next_rung": dict(self.next_rung),
        }

    def load(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state`."""
        rungs = state["rungs"]
        if len(rungs) != self.num_rungs:
            raise ValueError(f"the snapshot has {len(rungs)} rungs, the config {self.num_rungs}")
        self.rungs = [[(float(m), str(rid)) for m, rid in results] for results in rungs]
        self.next_rung = {str(k): int(v) for k, v in state["next_rung"].items()}


class HalvingSearch(TrackedSearch):
    """Trials spread over one or more :class:`AshaBracket` (the trial's group is its bracket)."""

    def __init__(
        self,
        hyperparameters: Mapping[str, Hyperparameter],
        seed: int,
        *,
        metric: str,
        smaller_is_better: bool,
        time_metric: str,
        max_time: int,
        brackets: Sequence[AshaBracket],
    ) -> None:
        super().__init__(hyperparameters, seed)
        self._metric = metric
        self._smaller_is_better = smaller_is_better
        self._time_metric = time_metric
        self._max_time = max_time
        self.brackets = list(brackets)

    @property
    def max_concurrent_trials(self) -> int:
        return sum(b.cap for b in self.brackets)

    def _fill(self, group: int) -> list[Action]:
        bracket = self.brackets[group]
        actions: list[Action] = []
        while (
            self.created_trials(group) - self.invalid_trials(group) < bracket.max_trials
            and self.live_trials(group) < bracket.cap
        ):
            create = self._create(sample_hyperparameters(self._hps, self._rng), group)
            bracket.add(create.request_id)
            actions.append(create)
        return actions

    def _initial(self) -> list[Action]:
        return [a for group in range(len(self.brackets)) for a in self._fill(group)]

    def _validation(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        value = read_number(metrics, self._metric, role="searcher metric")
        if not self._smaller_is_better:
            value = -value
        value = WORST_METRIC if math.isnan(value) else min(max(value, -WORST_METRIC), WORST_METRIC)
        time = read_number(metrics, self._time_metric, role="time metric")
        if not math.isfinite(time) or time < 0:
            raise SearcherMetricError(
                f"the time metric {self._time_metric!r} must be a finite number >= 0, "
                f"got {metrics.get(self._time_metric)!r}"
            )
        self._set_progress(request_id, time / self._max_time)
        bracket = self.brackets[self._row(request_id).group]
        return [Stop(request_id)] if bracket.report(request_id, time, value) else []

    def _exited(self, request_id: str, reason: ExitedReason | None) -> list[Action]:
        trial = self._row(request_id)
        bracket = self.brackets[trial.group]
        if reason is not None and reason.invalid_hp:
            bracket.invalid(request_id)
        elif reason is not None and not trial.stopped:
            bracket.ended_early(request_id)
        bracket.exited(request_id)
        return self._fill(trial.group)

    def _planned_trials(self) -> int:
        return sum(b.max_trials for b in self.brackets)

    def _state(self) -> dict[str, Any]:
        return {"brackets": [b.state() for b in self.brackets]}

    def _load(self, state: Mapping[str, Any]) -> None:
        if len(state["brackets"]) != len(self.brackets):
            raise ValueError("the snapshot's brackets do not match the config")
        for bracket, data in zip(self.brackets, state["brackets"], strict=True):
            bracket.load(data)
            # A version-1 snapshot kept every trial's next rung; only live trials need one.
            for request_id in [r for r in bracket.next_rung if r not in self._trials]:
                bracket.exited(request_id)
        for request_id in self._trials:
            if all(request_id not in b.next_rung for b in self.brackets):
                raise ValueError(f"live trial {request_id!r} has no rung in its bracket")


class AsyncHalvingSearch(HalvingSearch):
    """``async_halving``: one ASHA bracket of ``num_rungs`` rungs."""

    name = "async_halving"

    def __init__(
        self,
        hyperparameters: Mapping[str, Hyperparameter],
        seed: int,
        *,
        metric: str,
        smaller_is_better: bool,
        time_metric: str,
        max_time: int,
        num_rungs: int,
        divisor: float,
        max_trials: int,
        max_concurrent_trials: int,
    ) -> None:
        bracket = AshaBracket(
            num_rungs=num_rungs,
            divisor=divisor,
            max_time=max_time,
            max_trials=max_trials,
            max_concurrent_trials=max_concurrent_trials,
        )
        super().__init__(
            hyperparameters,
            seed,
            metric=metric,
            smaller_is_better=smaller_is_better,
            time_metric=time_metric,
            max_time=max_time,
            brackets=[bracket],
        )
