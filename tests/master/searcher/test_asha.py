"""async_halving: rungs, promotions, early stopping, metrics, replacements."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stalwart.master.searcher import (
    AsyncHalvingSearch,
    Create,
    ExitedReason,
    SearcherMetricError,
    Shutdown,
    Stop,
    make_searcher,
)
from stalwart.master.searcher.asha import rung_units
from tests.master.searcher.sim import SimTrial, Simulation, make_config

HPS: dict[str, Any] = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}, "tag": "const"}
VALID = make_config({"name": "single", "metric": "loss"}, HPS).hyperparameters


def quality(hp: Mapping[str, Any], t: float) -> float:
    """Loss with a time-invariant ranking: lower x is better at every time."""
    return float(hp["x"]) + 1.0 / (1.0 + t)


def asha(
    *,
    max_trials: int = 16,
    num_rungs: int = 3,
    divisor: float = 4,
    mct: int = 4,
    max_time: int = 16,
    smaller_is_better: bool = True,
) -> AsyncHalvingSearch:
    return AsyncHalvingSearch(
        VALID,
        7,
        metric="loss",
        smaller_is_better=smaller_is_better,
        time_metric="batches",
        max_time=max_time,
        num_rungs=num_rungs,
        divisor=divisor,
        max_trials=max_trials,
        max_concurrent_trials=mct,
    )


def test_rung_units() -> None:
    assert rung_units(3, 4, 160) == [10, 40, 160]
    assert rung_units(3, 4, 16) == [1, 4, 16]
    assert rung_units(4, 4, 16) == [1, 1, 4, 16]
    assert rung_units(1, 3, 900) == [900]
    assert rung_units(2, 3, 900) == [300, 900]
    assert rung_units(2000, 4, 16)[0] == 1  # no overflow


def creates(actions: list[Any]) -> list[Create]:
    return [a for a in actions if isinstance(a, Create)]


def test_top_fraction_continues_and_the_rest_stop() -> None:
    s = asha(max_trials=6, num_rungs=2, divisor=2, mct=6, max_time=8)  # rungs [4, 8]
    trials = creates(s.initial_actions())
    assert len(trials) == 6
    ids = [c.request_id for c in trials]
    # Below the first rung nothing is decided.
    assert s.on_validation(ids[0], {"loss": 0.5, "batches": 3}) == []
    # Rung 0, divisor 2: keep the top max(int(n / 2), 1) results seen so far.
    assert s.on_validation(ids[0], {"loss": 0.5, "batches": 4}) == []  # 1st: best so far
    assert s.on_validation(ids[1], {"loss": 0.7, "batches": 4}) == [Stop(ids[1])]  # 2nd of 2
    assert s.on_validation(ids[2], {"loss": 0.1, "batches": 4}) == []  # new best
    assert s.on_validation(ids[3], {"loss": 0.3, "batches": 5}) == []  # 2nd of 4: top 2
    assert s.on_validation(ids[4], {"loss": 0.9, "batches": 4}) == [Stop(ids[4])]
    # A stopped trial's later reports are ignored.
    assert s.on_validation(ids[1], {"loss": 0.0, "batches": 8}) == []
    # Reaching the top rung completes the trial with Stop.
    assert s.on_validation(ids[2], {"loss": 0.05, "batches": 8}) == [Stop(ids[2])]
    # A trial can pass several rungs in one report.
    assert s.on_validation(ids[5], {"loss": 0.01, "batches": 9}) == [Stop(ids[5])]
    assert s.progress() < 1.0
    # Exits of stopped trials make no new trials: all six were created.
    for rid in (ids[1], ids[4], ids[2], ids[5], ids[0]):
        assert s.on_trial_exited(rid) == []
    assert s.on_trial_exited(ids[3]) == [Shutdown()]


def test_determined_adaptive_asha_vector_as_one_bracket() -> None:
    """Determined's test: divisor 3, 900 batches, two rungs [300, 900], three trials."""
    s = asha(max_trials=3, num_rungs=2, divisor=3, mct=3, max_time=900)
    a, b, c = (x.request_id for x in creates(s.initial_actions()))
    assert s.on_validation(a, {"loss": 0.1, "batches": 300}) == []
    assert s.on_validation(b, {"loss": 0.2, "batches": 300}) == [Stop(b)]
    assert s.on_validation(c, {"loss": 0.3, "batches": 300}) == [Stop(c)]
    assert s.on_validation(a, {"loss": 0.1, "batches": 900}) == [Stop(a)]


def test_bigger_is_better() -> None:
    s = asha(max_trials=2, num_rungs=2, divisor=2, mct=2, max_time=2, smaller_is_better=False)
    a, b = (x.request_id for x in creates(s.initial_actions()))
    assert s.on_validation(a, {"loss": 0.9, "batches": 1}) == []
    assert s.on_validation(b, {"loss": 0.5, "batches": 1}) == [Stop(b)]


def test_metric_errors_name_the_metric() -> None:
    s = asha()
    rid = creates(s.initial_actions())[0].request_id
    with pytest.raises(SearcherMetricError, match=r"searcher metric 'loss'.*missing.*acc, batches"):
        s.on_validation(rid, {"acc": 1, "batches": 3})
    with pytest.raises(SearcherMetricError, match="got True"):
        s.on_validation(rid, {"loss": True, "batches": 3})
    with pytest.raises(SearcherMetricError, match="time metric 'batches'"):
        s.on_validation(rid, {"loss": 1.0})
    with pytest.raises(SearcherMetricError, match="finite number >= 0"):
        s.on_validation(rid, {"loss": 1.0, "batches": -1})
    with pytest.raises(SearcherMetricError, match="finite number >= 0"):
        s.on_validation(rid, {"loss": 1.0, "batches": "NaN"})
    assert SearcherMetricError.code == "invalid_searcher_metric"


def test_nan_ranks_last_and_infinities_stay_json_safe() -> None:
    s = asha(max_trials=3, num_rungs=2, divisor=2, mct=3, max_time=2)
    a, b, c = (x.request_id for x in creates(s.initial_actions()))
    assert s.on_validation(a, {"loss": 5.0, "batches": 1}) == []
    assert s.on_validation(b, {"loss": math.nan, "batches": 1}) == [Stop(b)]
    assert s.on_validation(c, {"loss": "-Infinity", "batches": 1}) == []
    assert s.on_validation(a, {"loss": math.inf, "batches": 2}) == [Stop(a)]
    json.dumps(s.snapshot(), allow_nan=False)


def test_invalid_hyperparameters_are_replaced_and_forgotten() -> None:
    s = asha(max_trials=2, num_rungs=2, divisor=2, mct=1, max_time=2)
    [a] = creates(s.initial_actions())
    assert s.on_validation(a.request_id, {"loss": 0.0, "batches": 1}) == []
    [b] = creates(s.on_trial_exited_early(a.request_id, ExitedReason.INVALID_HP))
    # a's result was removed: b is alone in rung 0 and continues even with a worse loss.
    assert s.on_validation(b.request_id, {"loss": 5.0, "batches": 1}) == []
    [c] = creates(s.on_trial_exited(b.request_id))
    assert s.on_trial_exited_early(c.request_id, ExitedReason.ERRORED) == [Shutdown()]


def test_errored_trial_ranks_last_in_its_next_rung() -> None:
    s = asha(max_trials=3, num_rungs=2, divisor=2, mct=3, max_time=2)
    a, b, c = (x.request_id for x in creates(s.initial_actions()))
    assert s.on_trial_exited_early(a, ExitedReason.ERRORED) == []
    # Rung 0 now holds a (worst); b is 1st of 2 and continues; c is 2nd of 3, int(3/2) = 1: stop.
    assert s.on_validation(b, {"loss": 1.0, "batches": 1}) == []
    assert s.on_validation(c, {"loss": 2.0, "batches": 1}) == [Stop(c)]


def test_default_concurrency_is_divisor_to_the_rungs_minus_one() -> None:
    assert asha(mct=0, num_rungs=3, divisor=4, max_trials=100).max_concurrent_trials == 16
    assert asha(mct=0, num_rungs=3, divisor=4, max_trials=10).max_concurrent_trials == 10
    assert asha(mct=0, num_rungs=1, divisor=4, max_trials=10).max_concurrent_trials == 1
    assert asha(mct=0, num_rungs=900, divisor=4, max_trials=10).max_concurrent_trials == 10
    assert asha(mct=3, max_trials=2).max_concurrent_trials == 2


def noisy_failures(trial: SimTrial, rng: random.Random) -> ExitedReason | None:
    r = rng.random()
    if r < 0.02:
        return ExitedReason.INVALID_HP
    if r < 0.03:
        return ExitedReason.ERRORED
    return None


@settings(max_examples=40, deadline=None)
@given(
    max_trials=st.integers(1, 40),
    num_rungs=st.integers(1, 4),
    divisor=st.sampled_from([2.0, 3.0, 4.0]),
    mct=st.integers(0, 6),
    order=st.integers(0, 10_000),
    fail=st.booleans(),
)
def test_asha_properties(
    max_trials: int, num_rungs: int, divisor: float, mct: int, order: int, fail: bool
) -> None:
    config = make_config(
        {
            "name": "async_halving",
            "metric": "loss",
            "time_metric": "batches",
            "max_time": 16,
            "num_rungs": num_rungs,
            "divisor": divisor,
            "max_trials": max_trials,
            "max_concurrent_trials": mct,
        },
        HPS,
        order,
    )
    searcher = make_searcher(config)
    sim = Simulation(
        searcher, quality, length=16, seed=order, early_exit=noisy_failures if fail else None
    )
    sim.run()
    # Exactly max_trials trials that count; never more live than allowed.
    assert len(sim.valid_trials) == max_trials
    assert sim.max_live <= searcher.max_concurrent_trials
    finished = [t for t in sim.trials.values() if t.exit_reason is None]
    if not fail:
        # Every trial got Stop: early, or on reaching max_time. Nobody trains past max_time.
        assert all(t.stop_requested for t in finished)
        # The best configuration reaches max_time (its ranking never changes with time).
        best = min(finished, key=lambda t: t.create.hparams["x"])
        assert best.time == 16
        # Early stopping happens once a rung sees more than `divisor` results.
        if num_rungs > 1 and max_trials > 2 * divisor:
            assert any(t.time < 16 for t in finished)


def test_legacy_max_length_gives_time_metric_and_max_time() -> None:
    config = make_config(
        {
            "name": "async_halving",
            "metric": "loss",
            "max_length": {"epochs": 4},
            "num_rungs": 2,
            "divisor": 2,
            "max_trials": 2,
        },
        HPS,
    )
    s = make_searcher(config)
    a, b = (x.request_id for x in creates(s.initial_actions()))
    assert s.on_validation(a, {"loss": 1.0, "epochs": 2}) == []
    assert s.on_validation(b, {"loss": 2.0, "epochs": 2}) == [Stop(b)]
    assert s.on_validation(a, {"loss": 1.0, "epochs": 4}) == [Stop(a)]
