"""B4's simulation: problems, the event-driven simulator, Stalwart's searchers as policies."""

from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np
import pytest
from bench.search.policies import stalwart_asha, stalwart_random
from bench.search.problems import MAX_EPOCHS, PROBLEMS, RUNG_EPOCHS, Problem, Vector
from bench.search.sim import Trace, compute_grid, regret_on_grid, simulate


@pytest.mark.parametrize("problem", list(PROBLEMS.values()), ids=list(PROBLEMS))
def test_curves_end_at_the_final_loss_and_decrease(problem: Problem) -> None:
    rng = np.random.default_rng(0)
    for x in rng.random((50, problem.dims)):
        losses = [problem.curve(x, epoch) for epoch in range(1, MAX_EPOCHS + 1)]
        assert losses[-1] == pytest.approx(problem.final(x))
        assert all(a >= b for a, b in itertools.pairwise(losses))
        assert problem.regret(x) >= 0


@pytest.mark.parametrize("problem", list(PROBLEMS.values()), ids=list(PROBLEMS))
def test_the_stated_optimum_is_the_minimum(problem: Problem) -> None:
    rng = np.random.default_rng(1)
    regrets = [problem.regret(x) for x in rng.random((5000, problem.dims))]
    assert min(regrets) >= 0
    assert min(regrets) < 0.01  # dense sampling comes close to it


def test_curve_rejects_epochs_outside_training() -> None:
    with pytest.raises(ValueError, match="epoch must be in"):
        PROBLEMS["mlp"].curve(np.zeros(3), MAX_EPOCHS + 1)


class FixedPolicy:
    """Runs the given points in order, never stops one early; records what it was told."""

    def __init__(self, points: list[Vector]) -> None:
        self.queue = deque(enumerate(points))
        self.reports: list[tuple[str, int]] = []
        self.finished_ids: list[str] = []

    def new_trial(self) -> tuple[str, Vector] | None:
        if not self.queue:
            return None
        i, x = self.queue.popleft()
        return f"t{i}", x

    def report(self, trial_id: str, epoch: int, loss: float) -> bool:
        self.reports.append((trial_id, epoch))
        return False

    def finished(self, trial_id: str) -> None:
        self.finished_ids.append(trial_id)


def test_one_worker_trains_each_trial_fully_and_counts_epochs() -> None:
    problem = PROBLEMS["branin"]
    policy = FixedPolicy([np.full(2, 0.5), np.full(2, 0.1)])
    trace = simulate(problem, policy, workers=1, budget=10_000, seed=0)
    assert trace.trials == 2
    assert trace.full_trainings == 2
    assert policy.finished_ids == ["t0", "t1"]
    assert [e for t, e in policy.reports if t == "t0"] == list(RUNG_EPOCHS)
    assert trace.epochs == [1, 3, 9, 27, 28, 30, 36, 54]


def test_workers_share_the_compute_count() -> None:
    problem = PROBLEMS["branin"]
    points = [np.full(2, 0.1 * i) for i in range(8)]
    trace = simulate(problem, FixedPolicy(points), workers=4, budget=10_000, seed=0)
    assert trace.trials == 8
    # the first four reports come together at time 1: 4 epochs of compute
    assert trace.epochs[:4] == [4, 4, 4, 4]
    assert trace.epochs[-1] == pytest.approx(8 * MAX_EPOCHS)


def test_the_budget_ends_the_run() -> None:
    problem = PROBLEMS["mlp"]
    points = [np.full(3, 0.3)] * 100
    trace = simulate(problem, FixedPolicy(points), workers=2, budget=100, seed=0)
    assert trace.epochs[-1] >= 100
    assert trace.epochs[-2] < 100


def test_regret_follows_the_best_observed_loss() -> None:
    problem = PROBLEMS["mlp"]
    good = np.array([0.55, 0.7, 0.3])  # the optimum
    bad = np.array([0.0, 0.0, 1.0])
    trace = simulate(problem, FixedPolicy([bad, good]), workers=1, budget=1000, seed=0)
    assert trace.regret[0] == pytest.approx(problem.regret(bad))
    assert trace.regret[-1] == pytest.approx(0.0, abs=1e-9)


def test_simulate_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="workers"):
        simulate(PROBLEMS["mlp"], FixedPolicy([]), workers=0, budget=10, seed=0)


def test_regret_on_grid_is_a_step_function() -> None:
    trace = Trace(epochs=[2.0, 5.0, 9.0], regret=[0.5, 0.3, 0.1])
    assert regret_on_grid(trace, [1.0, 2.0, 4.0, 5.0, 10.0]) == [math.inf, 0.5, 0.5, 0.3, 0.1]
    assert compute_grid(10.0, 4) == [2.5, 5.0, 7.5, 10.0]


def test_the_same_seed_gives_the_same_search() -> None:
    problem = PROBLEMS["branin"]
    first = simulate(problem, stalwart_asha(2, 4, 500, seed=3), 4, 500, seed=3)
    second = simulate(problem, stalwart_asha(2, 4, 500, seed=3), 4, 500, seed=3)
    assert first == second


def test_stalwart_random_trains_every_trial_to_the_end() -> None:
    trace = simulate(PROBLEMS["mlp"], stalwart_random(3, 4, 10, seed=0), 4, 10_000, seed=0)
    assert trace.trials == 10
    assert trace.full_trainings == 10
    assert trace.stops == 0


def test_stalwart_asha_stops_most_trials_and_beats_random_at_equal_compute() -> None:
    problem = PROBLEMS["mlp"]
    budget = 20 * MAX_EPOCHS
    asha, random = [], []
    for seed in range(6):
        a = simulate(problem, stalwart_asha(3, 4, budget, seed), 4, budget, seed)
        r = simulate(problem, stalwart_random(3, 4, 24, seed), 4, budget, seed)
        assert a.stops > a.full_trainings
        asha.append(a.regret[-1])
        random.append(r.regret[-1])
    assert np.mean(asha) < np.mean(random)
