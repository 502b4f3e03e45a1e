"""adaptive_asha: brackets, trial and concurrency splits, and search quality against random."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stalwart.master.searcher import AdaptiveASHASearch, Create, Shutdown, Stop, make_searcher
from stalwart.master.searcher.adaptive_asha import (
    _floor_log,
    bracket_max_concurrent_trials,
    bracket_max_trials,
    bracket_rungs,
)
from tests.master.searcher.sim import Simulation, make_config

HPS: dict[str, Any] = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}}


def adaptive(**searcher: Any) -> dict[str, Any]:
    return {
        "name": "adaptive_asha",
        "metric": "loss",
        "time_metric": "batches",
        "max_time": 64,
        "max_trials": 64,
        **searcher,
    }


def test_floor_log_is_exact_on_powers() -> None:
    assert _floor_log(1000, 10) == 3
    assert _floor_log(999, 10) == 2
    assert _floor_log(64, 4) == 3
    assert _floor_log(1, 4) == 0
    assert _floor_log(5, 3) == 1


def test_bracket_rungs_by_mode() -> None:
    common: dict[str, Any] = {
        "max_rungs": 5,
        "max_time": 10_000,
        "max_trials": 1000,
        "divisor": 4.0,
    }
    assert bracket_rungs(mode="aggressive", **common) == [5]
    assert bracket_rungs(mode="standard", **common) == [5, 4, 3]
    assert bracket_rungs(mode="conservative", **common) == [5, 4, 3, 2, 1]
    # max_rungs is capped by log_divisor(max_time) + 1 and log_divisor(max_trials) + 1.
    assert bracket_rungs(mode="conservative", **{**common, "max_time": 16}) == [3, 2, 1]
    assert bracket_rungs(mode="conservative", **{**common, "max_trials": 3}) == [1]
    assert bracket_rungs(mode="standard", **common, explicit=[1, 3]) == [3, 1]
    with pytest.raises(ValueError, match=">= 1"):
        bracket_rungs(mode="standard", **common, explicit=[0])


def test_bracket_trial_and_concurrency_splits() -> None:
    assert bracket_max_trials(64, 4.0, [4, 3, 2]) == [45, 14, 5]
    assert bracket_max_trials(5, 3.0, [2, 1]) == [3, 2]
    assert bracket_max_trials(2, 4.0, [3, 2, 1]) == [1, 1, 1]  # at least one each
    assert bracket_max_trials(100, 4.0, [2000, 3]) == [100, 1]  # no overflow; 1 at least
    assert bracket_max_concurrent_trials(16, 4.0, [45, 14, 5]) == [6, 5, 5]
    assert bracket_max_concurrent_trials(2, 4.0, [45, 14, 5]) == [1, 1, 1]  # rounded up to 3
    assert bracket_max_concurrent_trials(0, 4.0, [45, 14, 5]) == [5, 5, 5]
    assert bracket_max_concurrent_trials(0, 4.0, [45, 14, 2]) == [4, 4, 4]


def test_determined_standard_mode_vector() -> None:
    """Determined's adaptive_asha test: 900 batches, 5 trials, standard, max_rungs 2, divisor 3."""
    config = make_config(
        adaptive(
            max_time=900,
            max_trials=5,
            mode="standard",
            max_rungs=2,
            divisor=3,
            max_concurrent_trials=5,
        ),
        HPS,
    )
    s = make_searcher(config)
    assert isinstance(s, AdaptiveASHASearch)
    assert [(b.num_rungs, b.max_trials, b.cap, b.units) for b in s.brackets] == [
        (2, 3, 3, [300, 900]),
        (1, 2, 2, [900]),
    ]
    ids = [a.request_id for a in s.initial_actions() if isinstance(a, Create)]
    losses = dict(zip(ids, [0.1, 0.2, 0.3, 0.4, 0.5], strict=True))
    stopped_at: dict[str, int] = {}
    for batches in (300, 900):
        for rid in ids:
            if rid not in stopped_at and s.on_validation(
                rid, {"loss": losses[rid], "batches": batches}
            ) == [Stop(rid)]:
                stopped_at[rid] = batches
    assert [stopped_at[rid] for rid in ids] == [900, 300, 300, 900, 900]
    actions = [a for rid in ids for a in s.on_trial_exited(rid)]
    assert actions == [Shutdown()]


@settings(max_examples=40, deadline=None)
@given(
    max_trials=st.integers(1, 60),
    mode=st.sampled_from(["aggressive", "standard", "conservative"]),
    max_rungs=st.integers(1, 5),
    mct=st.integers(0, 12),
    divisor=st.sampled_from([2.0, 3.0, 4.0]),
    order=st.integers(0, 10_000),
)
def test_adaptive_properties(
    max_trials: int, mode: str, max_rungs: int, mct: int, divisor: float, order: int
) -> None:
    config = make_config(
        adaptive(
            max_time=16,
            max_trials=max_trials,
            mode=mode,
            max_rungs=max_rungs,
            divisor=divisor,
            max_concurrent_trials=mct,
        ),
        HPS,
        order,
    )
    s = make_searcher(config)
    assert isinstance(s, AdaptiveASHASearch)
    n = len(s.brackets)
    planned = sum(b.max_trials for b in s.brackets)
    assert max_trials <= planned <= max_trials + n
    if mct:
        assert s.max_concurrent_trials <= max(mct, n)
    sim = Simulation(s, lambda hp, t: float(hp["x"]) + 1 / (1 + t), length=16, seed=order).run()
    assert len(sim.creates) == planned
    assert sim.max_live <= s.max_concurrent_trials
    assert all(t.stop_requested for t in sim.trials.values())


def loss(hp: Mapping[str, Any], t: float) -> float:
    """Optimum at x = 0.3; early in training larger x looks slightly better (curves cross)."""
    x = float(hp["x"])
    return (x - 0.3) ** 2 + 0.1 * (1.2 - x) / (1.0 + t)


def found_optimum(sim: Simulation) -> bool:
    """The best trial trained to max_time is within 0.02 of the optimum x = 0.3."""
    full = [t for t in sim.trials.values() if t.time >= 64]
    best = min(full, key=lambda t: loss(t.create.hparams, 64))
    return abs(float(best.create.hparams["x"]) - 0.3) < 0.02


def test_adaptive_asha_beats_random_search_on_the_same_budget() -> None:
    """For experiment seeds 0..19: adaptive_asha (64 trials, max_time 64 batches, divisor 4,
    standard mode, 8 at once) against random search given the same number of trained batches
    (``floor(batches adaptive_asha trained / 64)`` full-length trials, same seed). A run "finds
    the optimum" when its best full-length trial has |x - 0.3| < 0.02. adaptive_asha must find
    it in at least 15 of 20 runs and in at least 5 more runs than random search."""
    asha_wins = random_wins = 0
    for seed in range(20):
        config = make_config(adaptive(max_concurrent_trials=8), HPS, seed)
        asha_run = Simulation(make_searcher(config), loss, length=64, seed=seed).run()
        budget = max(1, int(asha_run.units_trained() // 64))
        assert budget < 64  # early stopping saved most of the work
        random_config = make_config(
            {"name": "random", "metric": "loss", "max_trials": budget, "max_concurrent_trials": 8},
            HPS,
            seed,
        )
        random_run = Simulation(make_searcher(random_config), loss, length=64, seed=seed).run()
        asha_wins += found_optimum(asha_run)
        random_wins += found_optimum(random_run)
    assert asha_wins >= 15
    assert asha_wins >= random_wins + 5
