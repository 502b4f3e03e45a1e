"""single, random and grid: counts, concurrency, replacements, Shutdown, progress."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stalwart.master.searcher import (
    Create,
    ExitedReason,
    GridSearch,
    RandomSearch,
    SearcherStateError,
    Shutdown,
    SingleSearch,
    make_searcher,
)
from stalwart.master.searcher.sampling import grid_points
from tests.master.searcher.sim import SimTrial, Simulation, make_config

HPS: dict[str, Any] = {
    "lr": {"type": "log", "minval": -4, "maxval": -1},
    "layers": {"type": "int", "minval": 1, "maxval": 8},
    "opt": {"name": {"type": "categorical", "vals": ["sgd", "adam"]}, "wd": 0.01},
}
GRID_HPS: dict[str, Any] = {
    "lr": {"type": "log", "minval": -4, "maxval": -1, "count": 3},
    "layers": {"type": "int", "minval": 1, "maxval": 8, "count": 2},
    "opt": {"name": {"type": "categorical", "vals": ["sgd", "adam"]}, "wd": 0.01},
}

VALID = make_config({"name": "single", "metric": "loss"}, HPS).hyperparameters


def objective(hp: Mapping[str, Any], t: float) -> float:
    return float(hp["layers"]) / (1 + t)


def failing(p_errored: float, p_invalid: float) -> Any:
    def decide(trial: SimTrial, rng: random.Random) -> ExitedReason | None:
        r = rng.random()
        if r < p_invalid:
            return ExitedReason.INVALID_HP
        if r < p_invalid + p_errored:
            return ExitedReason.ERRORED
        return None

    return decide


def random_config(max_trials: int, mct: int, seed: int = 1) -> Any:
    return make_config(
        {
            "name": "random",
            "metric": "loss",
            "max_trials": max_trials,
            "max_concurrent_trials": mct,
        },
        HPS,
        seed,
    )


@settings(max_examples=40, deadline=None)
@given(
    max_trials=st.integers(1, 25),
    mct=st.integers(0, 8),
    seed=st.integers(0, 2**32 - 1),
    order=st.integers(0, 1000),
    p_invalid=st.sampled_from([0.0, 0.1]),
)
def test_random_creates_max_trials_within_the_concurrency_limit(
    max_trials: int, mct: int, seed: int, order: int, p_invalid: float
) -> None:
    searcher = make_searcher(random_config(max_trials, mct, seed))
    sim = Simulation(searcher, objective, length=3, seed=order, early_exit=failing(0.05, p_invalid))
    sim.run()
    assert len(sim.valid_trials) == max_trials
    expected_cap = min(mct, max_trials) if mct else 0
    assert searcher.max_concurrent_trials == expected_cap
    assert sim.max_live == (expected_cap or max_trials)
    assert len(sim.initial) == (expected_cap or max_trials)
    assert not any(t.stop_requested for t in sim.trials.values())


def test_random_is_reproducible_from_the_experiment_seed() -> None:
    def creates(seed: int) -> list[Create]:
        return Simulation(make_searcher(random_config(6, 2, seed)), objective, seed=3).run().creates

    assert creates(5) == creates(5)
    assert creates(5) != creates(6)
    hparams = [c.hparams for c in creates(5)]
    assert len({repr(h) for h in hparams}) == len(hparams)


def test_single_creates_one_trial_and_never_replaces_it() -> None:
    config = make_config({"name": "single", "metric": "loss"}, HPS)
    searcher = make_searcher(config)
    assert isinstance(searcher, SingleSearch)
    [create] = searcher.initial_actions()
    assert isinstance(create, Create)
    assert create.hparams["opt"]["wd"] == 0.01
    assert searcher.max_concurrent_trials == 1
    assert searcher.on_validation(create.request_id, {"whatever": 1}) == []
    assert searcher.progress() == 0.0
    searcher.on_trial_progress(create.request_id, 0.5)
    assert searcher.progress() == 0.5
    assert searcher.on_trial_exited_early(create.request_id, ExitedReason.INVALID_HP) == [
        Shutdown()
    ]
    assert searcher.progress() == 1.0
    assert searcher.on_trial_exited(create.request_id) == []  # a second exit report is ignored


def test_random_replaces_invalid_hyperparameters_but_not_errors() -> None:
    searcher = RandomSearch(VALID, 3, max_trials=2, max_concurrent_trials=1)
    [first] = searcher.initial_actions()
    assert isinstance(first, Create)
    [second] = searcher.on_trial_exited_early(first.request_id, ExitedReason.INIT_INVALID_HP)
    assert isinstance(second, Create)
    assert second.hparams != first.hparams
    [third] = searcher.on_trial_exited_early(second.request_id, ExitedReason.ERRORED)
    assert isinstance(third, Create)
    assert searcher.on_trial_exited(third.request_id) == [Shutdown()]


def test_shutdown_reports_failure_and_cancel_only_when_every_trial_did() -> None:
    searcher = RandomSearch(VALID, 3, max_trials=2, max_concurrent_trials=0)
    a, b = searcher.initial_actions()
    assert isinstance(a, Create)
    assert isinstance(b, Create)
    assert searcher.on_trial_exited_early(a.request_id, ExitedReason.ERRORED) == []
    assert searcher.on_trial_exited_early(b.request_id, "ERRORED") == [Shutdown(failure=True)]  # type: ignore[arg-type]

    searcher = RandomSearch(VALID, 3, max_trials=2, max_concurrent_trials=0)
    a, b = searcher.initial_actions()
    assert isinstance(a, Create)
    assert isinstance(b, Create)
    searcher.on_trial_exited_early(a.request_id, ExitedReason.USER_CANCELED)
    assert searcher.on_trial_exited_early(b.request_id, ExitedReason.USER_CANCELED) == [
        Shutdown(cancel=True)
    ]

    searcher = RandomSearch(VALID, 3, max_trials=2, max_concurrent_trials=0)
    a, b = searcher.initial_actions()
    assert isinstance(a, Create)
    assert isinstance(b, Create)
    searcher.on_trial_exited_early(a.request_id, ExitedReason.ERRORED)
    assert searcher.on_trial_exited(b.request_id) == [Shutdown()]


def test_contract_violations_raise() -> None:
    searcher = RandomSearch(VALID, 3, max_trials=1, max_concurrent_trials=0)
    searcher.initial_actions()
    with pytest.raises(SearcherStateError, match="already called"):
        searcher.initial_actions()
    with pytest.raises(SearcherStateError, match="no trial"):
        searcher.on_validation("nope", {"loss": 1})
    with pytest.raises(SearcherStateError, match="no trial"):
        searcher.on_trial_exited("nope")
    with pytest.raises(SearcherStateError, match="cannot restore"):
        searcher.restore({"searcher": "grid", "version": 1})
    with pytest.raises(SearcherStateError, match="malformed"):
        searcher.restore({"searcher": "random", "version": 1, "rng": [1, 2, 3, 4]})


def grid_config(mct: int) -> Any:
    return make_config({"name": "grid", "metric": "loss", "max_concurrent_trials": mct}, GRID_HPS)


@settings(max_examples=30, deadline=None)
@given(mct=st.integers(0, 15), order=st.integers(0, 1000), p_fail=st.sampled_from([0.0, 0.2]))
def test_grid_creates_every_point_exactly_once(mct: int, order: int, p_fail: float) -> None:
    searcher = make_searcher(grid_config(mct))
    assert isinstance(searcher, GridSearch)
    sim = Simulation(
        searcher, objective, length=2, seed=order, early_exit=failing(p_fail / 2, p_fail / 2)
    )
    sim.run()
    expected = grid_points(
        make_config({"name": "grid", "metric": "loss"}, GRID_HPS).hyperparameters
    )
    assert len(expected) == 12
    created = [c.hparams for c in sim.creates]
    assert created == expected  # every point once, in grid order, failures not retried
    assert sim.max_live == (min(mct, 12) if mct else 12)


def test_progress_counts_finished_trials_and_reported_progress() -> None:
    searcher = RandomSearch(VALID, 1, max_trials=4, max_concurrent_trials=2)
    a, b = searcher.initial_actions()
    assert isinstance(a, Create)
    assert isinstance(b, Create)
    searcher.on_trial_progress(a.request_id, 0.5)
    searcher.on_trial_progress(b.request_id, float("nan"))
    assert searcher.progress() == pytest.approx(0.125)
    searcher.on_trial_exited(a.request_id)
    assert searcher.progress() == pytest.approx(0.25)


def test_a_continued_single_search_runs_its_trial_again_and_shuts_down_again() -> None:
    config = make_config({"name": "single", "metric": "loss"}, HPS)
    searcher = make_searcher(config)
    assert isinstance(searcher, SingleSearch)
    [create] = searcher.initial_actions()
    assert isinstance(create, Create)
    searcher.on_trial_progress(create.request_id, 1.0)
    assert searcher.on_trial_exited(create.request_id) == [Shutdown()]

    restored = make_searcher(config)
    assert isinstance(restored, SingleSearch)
    restored.restore(searcher.snapshot())
    restored.continue_trial(create.request_id)
    assert restored.progress() == 0.0  # live again, no progress yet
    assert restored.live_trials() == 1
    restored.on_trial_progress(create.request_id, 0.5)
    assert restored.progress() == 0.5
    assert restored.on_trial_exited(create.request_id) == [Shutdown()]
    assert restored.progress() == 1.0

    # a trial the search never heard end (its experiment was canceled) continues too
    live = make_searcher(config)
    assert isinstance(live, SingleSearch)
    [other] = live.initial_actions()
    assert isinstance(other, Create)
    live.continue_trial(other.request_id)
    assert live.live_trials() == 1
    assert live.on_trial_exited(other.request_id) == [Shutdown()]
    with pytest.raises(SearcherStateError):
        live.continue_trial("nope")


@settings(max_examples=30, deadline=None)
@given(
    max_trials=st.integers(1, 20),
    mct=st.integers(0, 6),
    seed=st.integers(0, 2**32 - 1),
    order=st.integers(0, 1000),
)
def test_random_ahead_creates_the_same_trials_sooner_within_twice_the_limit(
    max_trials: int, mct: int, seed: int, order: int
) -> None:
    """Created ahead (queued successors), a random search samples exactly the trials it would
    have, in the same order, with at most ``max_concurrent_trials`` more alive at once."""
    plain = make_searcher(random_config(max_trials, mct, seed))
    ahead = make_searcher(random_config(max_trials, mct, seed))
    ahead.allow_ahead()
    cap = min(mct, max_trials) if mct else 0
    assert (ahead.ahead, ahead.live_limit()) == (cap, 2 * cap)
    runs = [Simulation(s, objective, length=2, seed=order).run() for s in (plain, ahead)]
    assert [c.hparams for c in runs[0].creates] == [c.hparams for c in runs[1].creates]
    assert [c.trial_seed for c in runs[0].creates] == [c.trial_seed for c in runs[1].creates]
    assert runs[1].max_live == min(2 * cap, max_trials) if cap else max_trials
    assert len(runs[1].initial) == (min(2 * cap, max_trials) if cap else max_trials)


def test_grid_ahead_creates_twice_the_limit_and_single_and_asha_none() -> None:
    grid = make_searcher(grid_config(3))
    grid.allow_ahead()
    assert len(grid.initial_actions()) == 6
    single = make_searcher(make_config({"name": "single", "metric": "loss"}, HPS))
    single.allow_ahead()
    assert single.ahead == 0
    asha = make_searcher(
        make_config(
            {
                "name": "async_halving",
                "metric": "loss",
                "max_trials": 8,
                "max_length": 4,
                "num_rungs": 2,
            },
            HPS,
        )
    )
    asha.allow_ahead()
    assert asha.ahead == 0
    restored = make_searcher(grid_config(3))  # ahead is configuration, not snapshot state
    restored.restore(grid.snapshot())
    assert restored.ahead == 0
