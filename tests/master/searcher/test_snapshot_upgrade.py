"""Version-1 snapshots (a row per trial ever created), as experiments in the field store them,
restore into the current searchers and continue with the decisions the version-1 code makes.

``fixtures/snapshots_v1.json`` was written by the version-1 searchers (mid-search, after half of
a simulated search's events; ``single`` after its trial's exit and ``single_live`` before it).
The ``upgrade`` traces of ``fixtures/traces_v1.json.gz`` record what the version-1 searchers did
after restoring each of them: 400 random events (8 sequences per snapshot), replayed here against
the current searchers (see :mod:`lockstep`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stalwart.master.searcher import (
    SearcherStateError,
    SearchMethod,
    Shutdown,
    SingleSearch,
    make_searcher,
)
from stalwart.master.searcher.base import SNAPSHOT_VERSION, TrackedSearch
from tests.master.searcher.lockstep import Replay, traces
from tests.master.searcher.sim import make_config

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "snapshots_v1.json").read_text())
HPS: dict[str, Any] = FIXTURES.pop("hyperparameters")
NAMES = sorted(FIXTURES)


def _upgrade_trace(name: str, order: int) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        t for t in traces()["upgrade"] if t["fixture"] == name and t["order"] == order
    ]
    [trace] = found
    return trace


def _config(name: str) -> Any:
    return make_config(FIXTURES[name]["searcher"], HPS, FIXTURES[name]["seed"])


def _restored(name: str) -> SearchMethod:
    searcher = make_searcher(_config(name))
    searcher.restore(FIXTURES[name]["snapshot"])
    return searcher


@pytest.mark.parametrize("name", NAMES)
def test_a_version_1_snapshot_becomes_counts_and_live_rows(name: str) -> None:
    old = FIXTURES[name]["snapshot"]
    assert old["version"] == 1
    searcher = _restored(name)
    new = searcher.snapshot()
    assert new["version"] == SNAPSHOT_VERSION == 2
    assert new["rng"] == old["rng"]
    assert new["id_key"] is None  # it goes on making the random ids it made
    live = [row for row in old["trials"] if row[2]]
    assert [row[0] for row in new["trials"]] == [row[0] for row in live]
    assert sum(g["created"] for g in new["groups"]) == len(old["trials"])
    exits = sum(n for g in new["groups"] for n in g["exited"].values())
    assert exits == len(old["trials"]) - len(live)
    [event, _, (progress, live_trials, invalid)] = _upgrade_trace(name, 0)["steps"][0]
    assert event == ["restored"]  # what the version-1 searcher reported after restoring it
    assert searcher.progress() == pytest.approx(progress, abs=1e-12)
    assert isinstance(searcher, TrackedSearch)
    assert (searcher.live_trials(), searcher.invalid_trials()) == (live_trials, invalid)
    for bracket in new["method"].get("brackets", []):
        assert set(bracket["next_rung"]) <= {row[0] for row in live}
    again = make_searcher(_config(name))
    again.restore(json.loads(json.dumps(new)))
    assert again.snapshot() == new


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("order", range(8))
def test_a_version_1_search_continues_with_the_same_decisions(name: str, order: int) -> None:
    old = FIXTURES[name]["snapshot"]
    config = _config(name)

    def restore(snapshot: dict[str, Any]) -> SearchMethod:
        restored = make_searcher(config)
        restored.restore(snapshot)
        return restored

    trace = _upgrade_trace(name, order)
    run = Replay(_restored(name), trace["max_concurrent_trials"], restore, counter_ids=False)
    run.ids = [row[0] for row in old["trials"]]
    run.play(trace["steps"], f"{name} order {order}")
    assert [step[0] for step in trace["steps"]].count(["continue"]) == (name == "single")
    actions = [a for step in trace["steps"] if isinstance(step[1], list) for a in step[1]]
    assert [a[0] for a in actions].count("shutdown") == 1  # the search ran to its end
    assert actions[-1][0] == "shutdown"


def test_a_version_1_single_search_continues_its_trial() -> None:
    searcher = _restored("single")
    assert isinstance(searcher, SingleSearch)
    [row] = FIXTURES["single"]["snapshot"]["trials"]
    assert searcher.progress() == 1.0
    with pytest.raises(SearcherStateError):
        searcher.continue_trial("67594f96-cac8-4520-a6dd-000000000000")
    searcher.continue_trial(row[0])
    assert searcher.live_trials() == 1
    assert searcher.progress() == 0.0
    assert searcher.on_trial_exited(row[0]) == [Shutdown()]


def test_a_version_1_search_ignores_ids_it_cannot_tell_apart() -> None:
    """Version-1 ids are random: without the list of every id it made, a restored search cannot
    tell a trial that exited long ago from an id it never made, and ignores both."""
    searcher = _restored("random")
    assert isinstance(searcher, TrackedSearch)
    exited = [row[0] for row in FIXTURES["random"]["snapshot"]["trials"] if not row[2]]
    live = searcher.live_trials()
    for request_id in [*exited, "not-a-trial"]:
        assert searcher.on_validation(request_id, {"loss": 1}) == []
        searcher.on_trial_progress(request_id, 0.5)
        assert searcher.on_trial_exited(request_id) == []
    assert searcher.live_trials() == live


@pytest.mark.parametrize("version", [0, 3, None])
def test_other_snapshot_versions_are_refused(version: Any) -> None:
    snapshot = {**FIXTURES["random"]["snapshot"], "version": version}
    with pytest.raises(SearcherStateError, match="version"):
        make_searcher(_config("random")).restore(snapshot)


def test_a_malformed_version_2_snapshot_is_refused() -> None:
    searcher = make_searcher(_config("random"))
    searcher.initial_actions()
    good = searcher.snapshot()
    for bad in (
        {**good, "trials": good["trials"][1:]},  # a live trial's row is missing
        {**good, "groups": [{"group": 0, "created": 1, "exited": {"EXITED": 2}}]},
        {**good, "groups": [{"group": 0, "created": 3, "exited": {"BORED": 1}}]},
        {**good, "id_key": -1},
    ):
        with pytest.raises(SearcherStateError, match="malformed"):
            make_searcher(_config("random")).restore(bad)
