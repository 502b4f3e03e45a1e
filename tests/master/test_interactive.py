"""Interactive tasks on an in-process master: configs, placement, kills, idle timeouts and who
sees what (the official client's flows are in ``tests/compat/test_det_interactive.py``).

The agent is played through the agent protocol (:class:`tests.master.cluster.test_loop.FakeNode`)
and time is a :class:`~stalwart.master.clock.ManualClock`, so every step is deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from stalwart.config import DefaultsLayers
from stalwart.config.command import (
    CommandConfig,
    idle_timeout_seconds,
    known_settings,
    load_command_config,
)
from stalwart.errors import ConfigError, ForbiddenError, InvalidArgumentError, NotFoundError
from stalwart.master.app import open_state
from stalwart.master.clock import ManualClock
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import (
    Allocation,
    Task,
    TaskLog,
    User,
    Workspace,
    WorkspaceRole,
)
from stalwart.master.services import interactive as svc
from stalwart.master.services.passwords import hash_password
from stalwart.master.state import MasterState
from tests.master.cluster.test_loop import FakeNode
from tests.master.conftest import make_settings


@pytest.fixture
def state(tmp_path: Path) -> Iterator[MasterState]:
    st = open_state(make_settings(tmp_path / "home"))
    st.clock = ManualClock()
    st.serving_since = st.clock.monotonic()  # agents' grace counts from the manual clock
    try:
        yield st
    finally:
        st.engine.dispose()


def _user(state: MasterState, name: str, *, admin: bool = False) -> User:
    with state.sessions() as session:
        found = session.scalars(select(User).where(User.username == name)).one_or_none()
        if found is None:
            found = User(username=name, password_hash=hash_password(""), admin=admin, active=True)
            session.add(found)
            session.commit()
        session.refresh(found)
        session.expunge(found)
        return found


def _launch(state: MasterState, user: User, launch: svc.Launch) -> str:
    with state.sessions() as session:
        task, _ = svc.launch_task(session, state.settings, session.merge(user), launch)
        session.commit()
        return task.task_id


def _allocation(state: MasterState, task_id: str) -> Allocation:
    with state.sessions() as session:
        found = svc.latest_allocation(session, task_id)
        assert found is not None
        session.expunge(found)
        return found


def test_command_configs_get_the_kinds_defaults_and_readable_errors() -> None:
    assert load_command_config({"entrypoint": "true"}, "COMMAND").slots == 1
    assert load_command_config({}, "TENSORBOARD").slots == 0
    typed = load_command_config({"idle_timeout": "2m", "resources": {"slots": 0}}, "NOTEBOOK")
    assert (typed.idle_seconds, typed.slots) == (120.0, 0)
    assert idle_timeout_seconds(90) == 90.0
    with pytest.raises(ConfigError) as caught:
        load_command_config({"idle_timeout": "soon", "resources": {"slots": "two"}}, "COMMAND")
    text = "; ".join(caught.value.problems)
    assert "not a duration" in text
    assert "slots" in text


def test_a_task_takes_from_a_template_only_what_a_task_config_has() -> None:
    template = {
        "description": "from the template",
        "resources": {"slots": 0, "resource_pool": "gpus", "not_a_task_setting": 4},
        "searcher": {"name": "single", "metric": "loss"},
        "hyperparameters": {"lr": 0.1},
    }
    assert known_settings(template, CommandConfig) == {
        "description": "from the template",
        "resources": {"slots": 0, "resource_pool": "gpus"},
    }
    typed = load_command_config(
        {"entrypoint": "true", "resources": {"resource_pool": "cpus"}},
        "COMMAND",
        DefaultsLayers(template=template),
    )
    assert typed.description == "from the template"
    assert typed.slots == 0  # the template's, not the kind's default
    assert typed.resources.resource_pool == "cpus"  # the task's own setting wins
    assert known_settings(None, CommandConfig) == {}


def test_a_command_without_an_entrypoint_is_refused_and_nothing_is_written(
    state: MasterState,
) -> None:
    admin = _user(state, "admin")
    with pytest.raises(InvalidArgumentError, match="needs an entrypoint"):
        _launch(state, admin, svc.Launch(kind="COMMAND"))
    with state.sessions() as session:
        assert session.scalars(select(Task).where(Task.trial_id.is_(None))).all() == []


def test_a_command_runs_on_an_agent_with_its_contract_and_ends(state: MasterState) -> None:
    node = FakeNode(state, "n1", slots=1)
    node.sync()
    task_id = _launch(
        state,
        _user(state, "admin"),
        svc.Launch(kind="COMMAND", config={"entrypoint": ["echo hi"], "description": "greet"}),
    )
    loop = ClusterLoop(state)
    loop.run_round()
    (spec,) = node.sync().start
    assert spec.argv == ["sh", "-c", "echo hi"]
    assert spec.env["DET_TASK_TYPE"] == "COMMAND"
    assert int(spec.env["DET_SERVICE_PORT"]) > 0
    node.sync()
    node.exit(spec.allocation_id, 0)
    node.sync()
    loop.run_round()
    with state.sessions() as session:
        task = session.get(Task, task_id)
        assert task is not None
        assert task.end_time is not None
        allocation = svc.latest_allocation(session, task_id)
        assert svc.task_state(task, allocation) == "STATE_TERMINATED"
        assert svc.exit_status(allocation) == "exited with code 0"


def test_a_queued_task_is_killed_at_once_and_a_running_one_through_its_agent(
    state: MasterState,
) -> None:
    admin = _user(state, "admin")
    node = FakeNode(state, "n1", slots=1)
    node.sync()
    first = _launch(state, admin, svc.Launch(kind="COMMAND", config={"entrypoint": "sleep 60"}))
    second = _launch(state, admin, svc.Launch(kind="COMMAND", config={"entrypoint": "sleep 60"}))
    loop = ClusterLoop(state)
    loop.run_round()
    (spec,) = node.sync().start  # one slot: the second waits (FIFO)
    assert spec.task_id == first
    with state.sessions() as session:
        queued = session.get(Task, second)
        assert queued is not None
        assert svc.task_state(queued, svc.latest_allocation(session, second)) == "STATE_QUEUED"
        assert svc.kill_task(session, session.merge(admin), queued) == set()
        session.commit()
        assert queued.end_time is not None
        running = session.get(Task, first)
        assert running is not None
        assert svc.kill_task(session, session.merge(admin), running) == {spec.allocation_id}
        session.commit()
    assert node.sync().kill == [spec.allocation_id]


def test_only_the_owner_or_an_admin_kills_and_outsiders_do_not_see_it(state: MasterState) -> None:
    owner = _user(state, "owner")
    other = _user(state, "other")
    with state.sessions() as session:
        private = Workspace(name="private", default_role="none")
        session.add(private)
        session.flush()
        session.add(WorkspaceRole(workspace_id=private.id, user_id=owner.id, role="member"))
        session.commit()
        private_id = private.id
    task_id = _launch(
        state,
        owner,
        svc.Launch(kind="COMMAND", config={"entrypoint": "true"}, workspace_id=private_id),
    )
    with state.sessions() as session:
        task = session.get(Task, task_id)
        assert task is not None
        with pytest.raises(ForbiddenError, match="only its owner or an admin"):
            svc.kill_task(session, session.merge(other), task)
        with pytest.raises(NotFoundError):
            svc.get_task(session, session.merge(other), task_id)
        assert svc.list_tasks(session, session.merge(other), "COMMAND") == []
        assert [t.task_id for t in svc.list_tasks(session, session.merge(owner), "COMMAND")] == [
            task_id
        ]
    with pytest.raises(ForbiddenError, match="cannot start tasks in workspace 'private'"):
        _launch(
            state,
            other,
            svc.Launch(kind="COMMAND", config={"entrypoint": "true"}, workspace_id=private_id),
        )


def _ready_notebook(state: MasterState, idle_timeout: str) -> tuple[str, ClusterLoop, FakeNode]:
    node = FakeNode(state, "n1", slots=1)
    node.sync()
    task_id = _launch(
        state,
        _user(state, "admin"),
        svc.Launch(kind="NOTEBOOK", config={"idle_timeout": idle_timeout}),
    )
    loop = ClusterLoop(state)
    loop.run_round()
    (spec,) = node.sync().start
    assert spec.argv[-1] == "stalwart.tasks.notebook"
    assert spec.env["DET_NOTEBOOK_TOKEN"]
    node.sync()  # RUNNING
    with state.sessions() as session:
        allocation = session.get(Allocation, spec.allocation_id)
        assert allocation is not None
        assert allocation.state == "RUNNING"
        svc.mark_ready(session, allocation, state.clock.now())
        session.commit()
    return task_id, loop, node


def _stopped(state: MasterState, task_id: str) -> bool:
    return _allocation(state, task_id).state in ("TERMINATING", "TERMINATED")


def test_a_notebook_is_stopped_once_idle_past_its_timeout(state: MasterState) -> None:
    clock = state.clock
    assert isinstance(clock, ManualClock)
    task_id, loop, node = _ready_notebook(state, "60s")
    clock.advance(120)
    node.sync()  # the agent stays in touch
    loop.run_round()
    assert not _stopped(state, task_id)  # no idle report yet: a notebook is not idle by default
    with state.sessions() as session:
        task = session.get(Task, task_id)
        assert task is not None
        svc.report_idle(session, task, True, clock.now())
        session.commit()
    clock.advance(61)
    node.sync()
    loop.run_round()
    assert _stopped(state, task_id)
    with state.sessions() as session:
        lines = session.scalars(select(TaskLog.log).where(TaskLog.task_id == task_id)).all()
    assert any("idle_timeout" in line for line in lines)


def test_use_through_the_proxy_keeps_a_notebook_alive(state: MasterState) -> None:
    clock = state.clock
    assert isinstance(clock, ManualClock)
    task_id, loop, node = _ready_notebook(state, "60s")
    with state.sessions() as session:
        task = session.get(Task, task_id)
        assert task is not None
        svc.report_idle(session, task, True, clock.now())
        session.commit()
    for _ in range(4):
        clock.advance(40)
        node.sync()
        with state.sessions() as session:
            allocation = session.get(Allocation, _allocation(state, task_id).id)
            assert allocation is not None
            assert svc.note_activity(allocation, clock.now())
            session.commit()
        loop.run_round()
        assert not _stopped(state, task_id)


def test_a_tensorboard_names_the_trials_it_shows(state: MasterState) -> None:
    admin = _user(state, "admin")
    with pytest.raises(InvalidArgumentError, match="needs experiments or trials"):
        _launch(state, admin, svc.Launch(kind="TENSORBOARD"))
    with pytest.raises(NotFoundError, match="experiment 99"):
        _launch(state, admin, svc.Launch(kind="TENSORBOARD", experiment_ids=[99]))
    from tests.master.cluster.test_loop import _create

    exp_id = _create(state)
    ClusterLoop(state).run_round()  # the searcher creates the trial
    task_id = _launch(state, admin, svc.Launch(kind="TENSORBOARD", experiment_ids=[exp_id]))
    with state.sessions() as session:
        task = session.get(Task, task_id)
        assert task is not None
        sources = svc.tensorboard_sources(session, session.merge(admin), task.extra or {})
    assert [s["experiment_id"] for s in sources] == [exp_id]
    assert json.dumps(sources)  # what DET_TENSORBOARD_SOURCES carries
