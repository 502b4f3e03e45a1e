"""snapshot/restore mid-search continues with exactly the actions of an uninterrupted run."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stalwart.master.searcher import ExitedReason, make_searcher
from tests.master.searcher.sim import SimTrial, Simulation, config_searcher, make_config, replay

HPS: dict[str, Any] = {
    "x": {"type": "double", "minval": 0.0, "maxval": 1.0, "count": 3},
    "n": {"type": "int", "minval": 1, "maxval": 9, "count": 3},
    "g": {
        "opt": {"type": "categorical", "vals": ["a", "b"]},
        "k": {"type": "log", "minval": -2, "maxval": 0, "count": 2},
    },
}
SEARCHERS: dict[str, dict[str, Any]] = {
    "single": {"name": "single"},
    "random": {"name": "random", "max_trials": 12, "max_concurrent_trials": 3},
    "grid": {"name": "grid", "max_concurrent_trials": 4},
    "async_halving": {
        "name": "async_halving",
        "num_rungs": 3,
        "divisor": 2,
        "max_trials": 14,
        "max_concurrent_trials": 4,
        "time_metric": "batches",
        "max_time": 8,
    },
    "adaptive_asha": {
        "name": "adaptive_asha",
        "mode": "conservative",
        "max_trials": 20,
        "max_concurrent_trials": 5,
        "divisor": 2,
        "time_metric": "batches",
        "max_time": 8,
    },
}


def objective(hp: Mapping[str, Any], t: float) -> float:
    return float(hp["x"]) * float(hp["n"]) + 1 / (1 + t)


def failures(trial: SimTrial, rng: random.Random) -> ExitedReason | None:
    r = rng.random()
    if r < 0.03:
        return ExitedReason.INVALID_HP
    if r < 0.05:
        return ExitedReason.ERRORED
    return None


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(SEARCHERS)),
    seed=st.integers(0, 2**32 - 1),
    order=st.integers(0, 10_000),
    cut_fraction=st.floats(0, 1),
)
def test_restore_continues_exactly(name: str, seed: int, order: int, cut_fraction: float) -> None:
    config = make_config({"metric": "loss", **SEARCHERS[name]}, HPS, seed)
    sim = Simulation(
        make_searcher(config), objective, length=8, seed=order, early_exit=failures
    ).run()
    cut = int(cut_fraction * len(sim.log))
    replayed = replay(config_searcher(config), sim.log, sim.initial, cut)
    assert replayed == [actions for _, actions in sim.log]


def test_snapshot_is_plain_json_and_round_trips() -> None:
    for name, spec in SEARCHERS.items():
        config = make_config({"metric": "loss", **spec}, HPS, 3)
        searcher = make_searcher(config)
        searcher.initial_actions()
        snap = searcher.snapshot()
        assert json.loads(json.dumps(snap, allow_nan=False)) == snap
        assert snap["searcher"] == name
        again = make_searcher(config)
        again.restore(snap)
        assert again.snapshot() == snap
        assert again.progress() == searcher.progress()
