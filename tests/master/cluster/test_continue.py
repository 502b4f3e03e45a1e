"""Continuing a finished experiment through the cluster loop (the test plays the agent): the
same trial runs again from its latest checkpoint with the merged config, and the searcher ends
the experiment again when it exits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from stalwart.master.app import open_state
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import Experiment, Task, TaskLog, User
from stalwart.master.services import log_policies
from stalwart.master.services.checkpoints import CheckpointReport, report_checkpoint
from stalwart.master.services.experiment_continue import continue_experiment
from stalwart.master.state import MasterState
from tests.master.cluster.test_loop import SINGLE, FakeNode, _allocations, _create, _exp_state
from tests.master.cluster.test_loop import _trials as trials_of
from tests.master.conftest import make_settings


@pytest.fixture
def state(tmp_path: Path) -> Iterator[MasterState]:
    st = open_state(make_settings(tmp_path / "home", cluster={"agent_timeout": 60}))
    try:
        yield st
    finally:
        st.engine.dispose()


UUID = "c0ffee00-0000-4000-8000-00000000000{}"


def _checkpoint(state: MasterState, task_id: str, allocation_id: str, n: int, steps: int) -> None:
    with state.sessions() as session:
        report = CheckpointReport(
            uuid=UUID.format(n),
            state="COMPLETED",
            metadata={"steps_completed": steps},
            resources={"state.json": 10},
            task_id=task_id,
            allocation_id=allocation_id,
        )
        report_checkpoint(session, report, caller_allocation_id=allocation_id)
        session.commit()


def _continue(state: MasterState, exp_id: int, override: str | None) -> list[str]:
    with state.sessions() as session:
        admin = session.scalars(select(User).where(User.username == "admin")).one()
        continued = continue_experiment(session, admin, exp_id, override)
        session.commit()
    state.hints.experiment(exp_id)
    return continued.changed


def test_a_completed_trial_continues_from_its_latest_checkpoint(state: MasterState) -> None:
    loop, node = ClusterLoop(state), FakeNode(state)
    node.sync()
    exp_id = _create(state, SINGLE + "  max_length:\n    batches: 10\n")
    loop.run_round()
    (spec,) = node.sync().start
    _checkpoint(state, spec.task_id, spec.allocation_id, 1, 10)
    node.exit(spec.allocation_id, 0)
    node.sync()
    loop.run_round()
    assert _exp_state(state, exp_id) == "COMPLETED"
    (trial,) = trials_of(state, exp_id)
    assert trial.state == "COMPLETED"

    changed = _continue(state, exp_id, "searcher:\n  max_length:\n    batches: 20\n")
    assert changed == ["searcher"]
    assert _exp_state(state, exp_id) == "ACTIVE"
    loop.run_round()
    (again,) = node.sync().start
    assert again.env["DET_TRIAL_ID"] == str(trial.id)
    assert again.allocation_id.endswith(".2")
    assert again.env["DET_LATEST_CHECKPOINT"] == UUID.format(1)
    assert again.env["DET_STEPS_COMPLETED"] == "10"
    assert again.env["DET_TRIAL_RUN_ID"] == "2"
    config = json.loads(again.env["DET_EXPERIMENT_CONFIG"])
    assert config["searcher"]["max_length"] == {"batches": 20}
    (running,) = trials_of(state, exp_id)
    assert running.state == "ACTIVE"
    with state.sessions() as session:
        lines = [
            row.log
            for row in session.scalars(select(TaskLog).where(TaskLog.task_id == trial.task_id))
        ]
    assert any(
        "continued by admin with searcher changed" in line and "(10 steps)" in line
        for line in lines
    )

    node.sync()
    _checkpoint(state, again.task_id, again.allocation_id, 2, 20)
    node.exit(again.allocation_id, 0)
    node.sync()
    loop.run_round()
    assert _exp_state(state, exp_id) == "COMPLETED"  # the searcher shut down again
    (done,) = trials_of(state, exp_id)
    assert done.state == "COMPLETED"
    assert len(_allocations(state, trial.task_id)) == 2
    with state.sessions() as session:
        exp = session.get(Experiment, exp_id)
        assert exp is not None
        assert exp.progress == 1.0
        assert exp.end_time is not None


def test_an_errored_trial_gets_its_restarts_back(state: MasterState) -> None:
    loop, node = ClusterLoop(state), FakeNode(state)
    node.sync()
    exp_id = _create(state)  # max_restarts: 1
    loop.run_round()
    for _ in range(2):
        (spec,) = node.sync().start
        node.exit(spec.allocation_id, 3)
        node.sync()
        loop.run_round()
    assert _exp_state(state, exp_id) == "ERROR"
    (trial,) = trials_of(state, exp_id)
    assert trial.restarts == 1

    assert _continue(state, exp_id, None) == []
    loop.run_round()
    (spec,) = node.sync().start
    (trial,) = trials_of(state, exp_id)
    assert (trial.state, trial.restarts) == ("ACTIVE", 0)
    node.sync()
    node.exit(spec.allocation_id, 0)
    node.sync()
    loop.run_round()
    assert _exp_state(state, exp_id) == "COMPLETED"


def test_a_killed_experiment_continues(state: MasterState) -> None:
    from stalwart.master.services import experiments as exp_svc

    loop, node = ClusterLoop(state), FakeNode(state)
    node.sync()
    exp_id = _create(state)
    loop.run_round()
    (spec,) = node.sync().start
    node.sync()
    with state.sessions() as session:
        exp_svc.kill_experiment(session, exp_id)
    node.exit(spec.allocation_id, -9)
    node.sync()
    loop.run_round()
    assert _exp_state(state, exp_id) == "CANCELED"

    _continue(state, exp_id, "")
    loop.run_round()
    (spec,) = node.sync().start
    node.sync()
    node.exit(spec.allocation_id, 0)
    node.sync()
    loop.run_round()
    assert _exp_state(state, exp_id) == "COMPLETED"


def test_a_continued_trial_forgets_what_its_log_policies_asked(state: MasterState) -> None:
    """No retry and excluded agents belonged to the earlier run (Determined continues in a new
    task); the label stays."""
    loop, node = ClusterLoop(state), FakeNode(state)
    node.sync()
    exp_id = _create(state)
    loop.run_round()
    (spec,) = node.sync().start
    with state.sessions() as session:
        task = session.get(Task, spec.task_id)
        assert task is not None
        task.extra = {
            log_policies.MATCHED: "fatal",
            log_policies.DONT_RETRY: {"FATAL": "FATAL in the data"},
            log_policies.EXCLUDED: {"node-a": {"BAD": "BAD node"}},
        }
        session.commit()
    node.exit(spec.allocation_id, 3)
    node.sync()
    loop.run_round()
    assert _exp_state(state, exp_id) == "ERROR"  # cancel_retries: no restart
    assert _continue(state, exp_id, None) == []
    with state.sessions() as session:
        task = session.get(Task, spec.task_id)
        assert log_policies.dont_retry(task) == []
        assert task is not None
        assert log_policies.excluded_agents(task.extra) == frozenset()
        assert log_policies.label_of(task.extra) == "fatal"
