"""The searcher state grows with the live trials, not with every trial created (issue 25).

Only ASHA's rungs grow with the search (a promotion ranks a trial against every result recorded
in its rung, exited trials' included); everything else in a snapshot has a row per live trial
and a few counts.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from stalwart.master.searcher import (
    Create,
    ExitedReason,
    RandomSearch,
    SearcherStateError,
    Shutdown,
    Stop,
    make_searcher,
)
from stalwart.master.searcher.base import TrackedSearch, counter_request_id, request_id_number
from tests.master.searcher.sim import make_config

HPS: dict[str, Any] = {
    "lr": {"type": "log", "minval": -4, "maxval": -1},
    "layers": {"type": "int", "minval": 1, "maxval": 8},
}


def _round(searcher: TrackedSearch, config: Any) -> tuple[TrackedSearch, int]:
    """What the master does every round: snapshot to JSON, restore into a new searcher."""
    text = json.dumps(searcher.snapshot(), allow_nan=False)
    restored = make_searcher(config)
    restored.restore(json.loads(text))
    assert isinstance(restored, TrackedSearch)
    return restored, len(text)


def test_a_10000_trial_random_search_keeps_a_snapshot_of_its_16_live_trials() -> None:
    config = make_config(
        {"name": "random", "metric": "loss", "max_trials": 10_000, "max_concurrent_trials": 16},
        HPS,
        5,
    )
    searcher = make_searcher(config)
    assert isinstance(searcher, TrackedSearch)
    live = [a.request_id for a in searcher.initial_actions() if isinstance(a, Create)]
    rng = random.Random(0)
    exited: list[str] = []
    sizes: dict[int, int] = {}
    shutdown: list[Shutdown] = []
    while live:
        request_id = live.pop(rng.randrange(len(live)))
        searcher.on_trial_progress(request_id, 0.5)
        r = rng.random()
        if r < 0.05:
            actions = searcher.on_trial_exited_early(request_id, ExitedReason.ERRORED)
        elif r < 0.07:
            actions = searcher.on_trial_exited_early(request_id, ExitedReason.INVALID_HP)
        else:
            actions = searcher.on_trial_exited(request_id)
        exited.append(request_id)
        live += [a.request_id for a in actions if isinstance(a, Create)]
        shutdown += [a for a in actions if isinstance(a, Shutdown)]
        if len(exited) % 250 == 0 or not live:
            searcher, sizes[len(exited)] = _round(searcher, config)
            snapshot = searcher.snapshot()
            assert len(snapshot["trials"]) == searcher.live_trials() <= 16
    assert shutdown == [Shutdown()]
    assert searcher.progress() == 1.0
    created = searcher.created_trials()
    assert created - searcher.invalid_trials() == 10_000
    # The size does not grow with the trials created: a few digits of the counts at most.
    steady = [size for n, size in sizes.items() if 250 <= n < created - 16]
    assert max(steady) - min(steady) <= 16, sizes
    assert max(steady) < 3_000
    assert sizes[created] < 1_000  # over: no live trial, counts only
    # a trial that exited long ago is still told from an id the search never made
    first = exited[0]
    assert searcher.on_trial_exited(first) == []
    assert searcher.on_validation(first, {}) == []
    forged = counter_request_id(12345, 3)
    with pytest.raises(SearcherStateError, match="no trial"):
        searcher.on_trial_exited(forged)


def test_asha_state_beyond_its_rungs_stays_bounded() -> None:
    config = make_config(
        {
            "name": "async_halving",
            "metric": "loss",
            "num_rungs": 3,
            "divisor": 4,
            "max_trials": 2_000,
            "max_concurrent_trials": 8,
            "time_metric": "batches",
            "max_time": 16,
        },
        HPS,
        9,
    )
    searcher = make_searcher(config)
    assert isinstance(searcher, TrackedSearch)
    rng = random.Random(1)
    times: dict[str, int] = {}
    stopped: set[str] = set()

    def apply(actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Create):
                times[action.request_id] = 0
            elif isinstance(action, Stop):
                stopped.add(action.request_id)

    apply(searcher.initial_actions())
    rest: list[int] = []
    rounds = 0
    while times:
        request_id = rng.choice(sorted(times))
        if request_id in stopped or times[request_id] >= 16:
            del times[request_id]
            apply(searcher.on_trial_exited(request_id))
        elif rng.random() < 0.03:
            del times[request_id]
            apply(searcher.on_trial_exited_early(request_id, ExitedReason.ERRORED))
        else:
            times[request_id] += 1
            metrics = {"loss": rng.random(), "batches": times[request_id]}
            apply(searcher.on_validation(request_id, metrics))
        rounds += 1
        if rounds % 500 == 0:
            searcher, _ = _round(searcher, config)
            snapshot = searcher.snapshot()
            [bracket] = snapshot["method"]["brackets"]
            assert set(bracket["next_rung"]) == {row[0] for row in snapshot["trials"]}
            assert len(snapshot["trials"]) <= 8
            without_rungs = {**snapshot, "method": {"brackets": [{**bracket, "rungs": []}]}}
            rest.append(len(json.dumps(without_rungs)))
    assert searcher.created_trials() == 2_000
    assert max(rest) < 2_500, rest  # 8 live rows and their next rungs, at any point


def test_request_ids_are_uuids_numbered_in_creation_order() -> None:
    searcher = RandomSearch(HPS_T, 3, max_trials=50, max_concurrent_trials=0)
    creates = [a for a in searcher.initial_actions() if isinstance(a, Create)]
    key = searcher.snapshot()["id_key"]
    assert [request_id_number(key, c.request_id) for c in creates] == list(range(50))
    assert len({c.request_id for c in creates}) == 50
    assert all(c.request_id[14] == "4" for c in creates)  # version-4 UUIDs
    other = RandomSearch(HPS_T, 4, max_trials=50, max_concurrent_trials=0)
    other.initial_actions()
    assert request_id_number(other.snapshot()["id_key"], creates[0].request_id) is None
    with pytest.raises(SearcherStateError, match="no trial"):
        other.on_validation(creates[0].request_id, {})
    for bogus in ("", "x", "not-a-uuid", creates[0].request_id.upper()):
        with pytest.raises(SearcherStateError, match="no trial"):
            searcher.on_trial_progress(bogus, 0.5)


HPS_T = make_config({"name": "single", "metric": "loss"}, HPS).hyperparameters
