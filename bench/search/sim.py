"""An event-driven simulation of a hyperparameter search on simulated workers.

``simulate(problem, policy, workers, budget, seed)`` runs ``workers`` simulated workers: an idle
worker asks the policy for a trial; a trial trains one epoch per time unit and reports its
(noisy) loss at each of :data:`~bench.search.problems.RUNG_EPOCHS`; after each report the policy
says whether to stop it; a trial that reaches ``MAX_EPOCHS`` ends. Events are processed in time
order (ties by the order they were scheduled), so the result is a deterministic function of
the problem, the policy's decisions and ``seed``.

Compute is counted in epochs: the cumulative epochs at time ``t`` are the busy time of all
workers up to ``t``. The run ends when the cumulative epochs reach ``budget`` (the report that
crosses it is the last one counted) or when the policy has nothing left to run.

After each report the *incumbent* is the trial with the lowest loss observed so far (at any
epoch), and the regret is the noise-free final loss of its configuration minus the problem's
optimum. :func:`regret_on_grid` turns the resulting step function into values at fixed compute
points, the form the statistics and the peers' JSON use.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from bench.search.problems import MAX_EPOCHS, RUNG_EPOCHS, Problem, Vector

__all__ = ["Policy", "Trace", "compute_grid", "regret_on_grid", "simulate"]


class Policy(Protocol):
    """A search algorithm as the simulator drives it."""

    def new_trial(self) -> tuple[str, Vector] | None:
        """The next trial to run (its id and ``x`` in [0, 1]^d), or None when there is none now."""

    def report(self, trial_id: str, epoch: int, loss: float) -> bool:
        """A validation loss after ``epoch`` epochs; True when the trial must stop now."""

    def finished(self, trial_id: str) -> None:
        """The trial no longer runs (stopped, or trained ``MAX_EPOCHS``)."""


@dataclass
class Trace:
    """What one simulated search did: regret after each report, against cumulative epochs."""

    epochs: list[float] = field(default_factory=list)
    regret: list[float] = field(default_factory=list)
    trials: int = 0
    reports: int = 0
    stops: int = 0
    full_trainings: int = 0


@dataclass(order=True)
class _Event:
    time: float
    order: int
    worker: int = field(compare=False)
    trial_id: str = field(compare=False)
    x: Vector = field(compare=False)
    epoch: int = field(compare=False)


def _next_rung(epoch: int) -> int:
    for rung in RUNG_EPOCHS:
        if rung > epoch:
            return rung
    return MAX_EPOCHS


def simulate(problem: Problem, policy: Policy, workers: int, budget: float, seed: int) -> Trace:
    """Run ``policy`` on ``problem`` with ``workers`` workers until ``budget`` epochs are used."""
    if workers < 1 or budget <= 0:
        raise ValueError("workers must be >= 1 and budget > 0")
    rng = np.random.default_rng(seed)
    trace = Trace()
    events: list[_Event] = []
    order = 0
    busy_since: dict[int, float] = {}
    done_compute = 0.0
    best_loss = math.inf
    best_regret = math.inf
    idle = list(range(workers))

    def start(worker: int, now: float) -> bool:
        nonlocal order
        picked = policy.new_trial()
        if picked is None:
            return False
        trial_id, x = picked
        trace.trials += 1
        busy_since[worker] = now
        first = RUNG_EPOCHS[0]
        heapq.heappush(events, _Event(now + first, order, worker, trial_id, x, first))
        order += 1
        return True

    def fill(now: float) -> None:
        while idle and start(idle[0], now):
            idle.pop(0)

    fill(0.0)
    while events:
        event = heapq.heappop(events)
        now = event.time
        used = done_compute + sum(now - since for since in busy_since.values())
        loss = problem.observe(event.x, event.epoch, rng)
        trace.reports += 1
        if loss < best_loss:
            best_loss = loss
            best_regret = problem.regret(event.x)
        trace.epochs.append(used)
        trace.regret.append(best_regret)
        if used >= budget:
            break
        stop = policy.report(event.trial_id, event.epoch, loss)
        if stop or event.epoch >= MAX_EPOCHS:
            if event.epoch >= MAX_EPOCHS:
                trace.full_trainings += 1
            elif stop:
                trace.stops += 1
            done_compute += now - busy_since.pop(event.worker)
            policy.finished(event.trial_id)
            idle.append(event.worker)
            idle.sort()
            fill(now)
            continue
        nxt = _next_rung(event.epoch)
        heapq.heappush(
            events,
            _Event(now + nxt - event.epoch, order, event.worker, event.trial_id, event.x, nxt),
        )
        order += 1
        if idle:  # a policy that had nothing may have something now
            fill(now)
    return trace


def compute_grid(budget: float, points: int) -> list[float]:
    """``points`` evenly spaced compute values ``budget / points, ..., budget``."""
    if points < 1:
        raise ValueError("points must be >= 1")
    return [budget * (i + 1) / points for i in range(points)]


def regret_on_grid(trace: Trace, grid: Sequence[float]) -> list[float]:
    """The regret in force at each compute value of ``grid`` (the last report at or before it).

    ``inf`` before the first report; after the last report its regret holds.
    """
    values = []
    j = -1
    for point in grid:
        while j + 1 < len(trace.epochs) and trace.epochs[j + 1] <= point:
            j += 1
        values.append(trace.regret[j] if j >= 0 else math.inf)
    return values
