"""The searchers whose state grows with live trials only (issue 25) decide exactly as before.

``fixtures/traces_v1.json.gz`` records the version-1 searchers (before issue 25) on random configs
of all five searchers and random event sequences: validations with odd metrics, progress, exits
and early exits of live, stopped and long-exited trials, unknown request ids, ``det e continue`` of
a single search. Each trace is replayed against the current searchers (see :mod:`lockstep`), which
must give the same actions, progress, live and invalid counts, errors and shutdowns after every
event; the current searcher is also snapshotted through JSON and restored where the trace says, as
the master does every round.
"""

from __future__ import annotations

from typing import Any

import pytest

from stalwart.master.searcher import SearchMethod, make_searcher
from tests.master.searcher.lockstep import Replay, traces
from tests.master.searcher.sim import make_config

NAMES = ["single", "random", "grid", "async_halving", "adaptive_asha"]


def replay(trace: dict[str, Any], name: str) -> Replay:
    config = make_config(trace["searcher"], traces()["hyperparameters"], trace["seed"])

    def restore(snapshot: dict[str, Any]) -> SearchMethod:
        restored = make_searcher(config)
        restored.restore(snapshot)
        return restored

    run = Replay(make_searcher(config), trace["max_concurrent_trials"], restore)
    run.play(trace["steps"], name)
    return run


def test_the_traces_cover_every_searcher_and_event() -> None:
    recorded = traces()["random"]
    assert {t["searcher"]["name"] for t in recorded} == set(NAMES)
    events = {step[0][0] for t in recorded for step in t["steps"]}
    kinds = "initial validation progress exit early_exit unknown foreign continue round_trip"
    assert events == set(kinds.split())
    answers = {
        step[1] if isinstance(step[1], str) else "ok" for t in recorded for step in t["steps"]
    }
    assert {"ok", "SearcherStateError", "SearcherMetricError"} <= answers


@pytest.mark.parametrize("name", NAMES)
def test_same_actions_progress_and_shutdown_as_version_1(name: str) -> None:
    recorded = [t for t in traces()["random"] if t["searcher"]["name"] == name]
    assert len(recorded) >= 50
    for index, trace in enumerate(recorded):
        replay(trace, f"{name} trace {index} (seed {trace['seed']}, order {trace['order']})")


def test_long_random_searches_match_version_1() -> None:
    for index, trace in enumerate(traces()["long_random"]):
        run = replay(trace, f"long random search {index}")
        assert len(run.ids) >= 300
