"""Live Determined searches (adaptive ASHA, random) come over PAUSED, their search replayed into
Stalwart's searcher, and resume on activation: the running trials from their latest
checkpoints (same trials, none new for them), ASHA's stopped trials stay stopped, the search
ends with exactly ``max_trials`` trials. A second import changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from stalwart.master.app import open_state
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import Allocation, Experiment, MetricReport, Trial
from stalwart.master.importer import import_determined
from stalwart.master.services import experiments as exp_svc
from stalwart.master.state import MasterState
from tests.importer.conftest import Determined, new_determined
from tests.importer.seed import LiveSearches, add_live_searches
from tests.importer.test_import import _snapshot
from tests.master.cluster.test_loop import FakeNode
from tests.master.conftest import make_settings


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Determined, LiveSearches]]:
    """A seeded Determined database with the two live searches added."""
    for determined in new_determined(tmp_path_factory.mktemp("det-live")):
        seeded = determined.seeded
        searches = add_live_searches(
            determined.url, seeded.storage_dir, seeded.project_id, seeded.user_ids["alice"]
        )
        yield determined, searches


def _trials(session: Session, experiment_id: int) -> list[Trial]:
    return list(
        session.scalars(
            select(Trial).where(Trial.experiment_id == experiment_id).order_by(Trial.id)
        )
    )


def test_live_searches_come_over_paused_with_their_search_replayed(
    live: tuple[Determined, LiveSearches], target: Engine
) -> None:
    determined, searches = live
    report = import_determined(determined.url, target)
    assert not [s for s in report.skipped if s.kind == "searcher_state"]
    t = searches.trials
    with Session(target) as session:
        asha = session.get(Experiment, searches.asha_id)
        assert asha is not None
        assert asha.state == "PAUSED"
        assert asha.end_time is None
        assert "search was replayed" in asha.notes
        trials = {trial.id: trial for trial in _trials(session, asha.id)}
        assert set(trials) == {s.id for s in t.values() if s.experiment_id == asha.id}
        states = {role: trials[s.id].state for role, s in t.items() if s.id in trials}
        assert states == {
            "asha-best": "COMPLETED",
            "asha-stopped-1": "COMPLETED",
            "asha-stopped-2": "COMPLETED",
            "asha-running": "PAUSED",
            "asha-young": "PAUSED",
            "asha-errored": "ERROR",
        }
        for role in ("asha-running", "asha-young"):
            assert trials[t[role].id].latest_checkpoint == t[role].checkpoints[-1]
            assert trials[t[role].id].hparams == t[role].hparams  # Determined's, kept
        assert asha.searcher_state is not None
        snapshot = asha.searcher_state["snapshot"]
        # a row per live trial; the ones that ended are only counted (issue 25)
        live_requests = {row[0] for row in snapshot["trials"]}
        assert live_requests == {trials[t[r].id].request_id for r in ("asha-running", "asha-young")}
        [counts] = snapshot["groups"]
        assert counts["created"] == len(trials)
        assert counts["exited"] == {"EXITED": 3, "ERRORED": 1}
        # ASHA's rungs: the four trials that reached 100 batches and the errored one (ranked
        # last) at the first; the best at the top rung (400).
        request = {role: trials[s.id].request_id for role, s in t.items() if s.id in trials}
        first_rung, top_rung = snapshot["method"]["brackets"][0]["rungs"]
        assert [rid for _, rid in first_rung] == [
            request[r]
            for r in (
                "asha-running",
                "asha-best",
                "asha-stopped-1",
                "asha-stopped-2",
                "asha-errored",
            )
        ]
        assert [rid for _, rid in top_rung] == [request["asha-best"]]
        highest = session.scalar(
            select(func.max(MetricReport.id))
            .join(Trial, Trial.id == MetricReport.trial_id)
            .where(Trial.experiment_id == asha.id, MetricReport.group == "validation")
        )
        assert asha.searcher_state["cursor"] == highest  # the replay fed them; not again

        rand = session.get(Experiment, searches.random_id)
        assert rand is not None
        assert rand.state == "PAUSED"
        rtrials = _trials(session, rand.id)
        assert len(rtrials) == searches.random_max_trials
        done, running, created = rtrials
        assert (done.id, done.state) == (t["random-done"].id, "COMPLETED")
        assert (running.id, running.state) == (t["random-running"].id, "PAUSED")
        assert created.state == "PAUSED"  # the Create Determined had not carried out yet
        assert created.latest_checkpoint is None

    before = _snapshot(target)
    again = import_determined(determined.url, target)
    assert _snapshot(target) == before
    counts = again.as_json()["counts"]
    assert all("imported" not in c for c in counts.values()), counts


@pytest.fixture
def master(tmp_path: Path) -> Iterator[MasterState]:
    state = open_state(make_settings(tmp_path / "home", cluster={"agent_timeout": 60}))
    try:
        yield state
    finally:
        state.engine.dispose()


def _run_to_the_end(
    master: MasterState, loop: ClusterLoop, node: FakeNode, experiment_id: int
) -> list[str]:
    """Exit 0 every container the master starts until the experiment ends (bounded); the
    task ids started, in order."""
    started: list[str] = []
    for _ in range(20):
        loop.run_round()
        response = node.sync()
        started += [spec.task_id for spec in response.start]
        for spec in response.start:
            node.exit(spec.allocation_id, 0)
        node.sync()
        loop.run_round()
        with master.sessions() as session:
            experiment = session.get(Experiment, experiment_id)
            assert experiment is not None
            if experiment.state in ("COMPLETED", "ERROR", "CANCELED"):
                assert experiment.state == "COMPLETED"
                return started
    raise AssertionError("the experiment did not end in 20 rounds")


def test_activated_searches_resume_their_trials_and_finish(
    live: tuple[Determined, LiveSearches], master: MasterState
) -> None:
    determined, searches = live
    import_determined(determined.url, master.engine)
    t = searches.trials
    loop = ClusterLoop(master)
    node = FakeNode(master, slots=4)
    node.sync()

    with master.sessions() as session:
        exp_svc.activate_experiment(session, searches.asha_id)
    master.hints.experiment(searches.asha_id)
    loop.run_round()
    first = node.sync().start
    resumed = {spec.task_id: spec for spec in first}
    with master.sessions() as session:
        by_task = {trial.task_id: trial for trial in _trials(session, searches.asha_id)}
        assert len(by_task) == searches.asha_max_trials  # no new trial for the live ones
        assert {by_task[task].id for task in resumed} == {
            t["asha-running"].id,
            t["asha-young"].id,
        }
        for task, spec in resumed.items():
            seeded = next(s for s in t.values() if s.id == by_task[task].id)
            assert spec.env["DET_LATEST_CHECKPOINT"] == seeded.checkpoints[-1]
    for spec in first:
        node.exit(spec.allocation_id, 0)
    node.sync()
    later = _run_to_the_end(master, loop, node, searches.asha_id)
    assert later == []  # nothing else was started: ASHA's stopped trials stay stopped
    with master.sessions() as session:
        trials = _trials(session, searches.asha_id)
        assert len(trials) == searches.asha_max_trials
        for role in ("asha-stopped-1", "asha-stopped-2", "asha-best"):
            trial = session.get(Trial, t[role].id)
            assert trial is not None
            assert trial.state == "COMPLETED"
            assert not session.scalars(
                select(Allocation).where(Allocation.task_id == trial.task_id)
            ).all()

    with master.sessions() as session:
        exp_svc.activate_experiment(session, searches.random_id)
    master.hints.experiment(searches.random_id)
    started = _run_to_the_end(master, loop, node, searches.random_id)
    with master.sessions() as session:
        trials = _trials(session, searches.random_id)
        assert len(trials) == searches.random_max_trials
        assert sorted(started) == sorted(tr.task_id for tr in trials[1:])
        assert all(tr.state == "COMPLETED" for tr in trials)
