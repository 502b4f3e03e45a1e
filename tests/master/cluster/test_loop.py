"""The cluster loop against a real database, with the agent protocol driven by the test.

The test plays the agent through the master's own sync service (:func:`apply_sync`, what the
``/agents/{id}/sync`` route calls): it reports slots and container states and gets specs back.
Each ``run_round()`` is one round of the loop, so every step is deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.agent.protocol import (
    ContainerStatus,
    LogLine,
    SlotInfo,
    SyncRequest,
    SyncResponse,
    TaskSpec,
)
from stalwart.master.app import open_state
from stalwart.master.clock import ManualClock
from stalwart.master.cluster.agent_sync import apply_sync
from stalwart.master.cluster.lifecycle import TrialExit
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import (
    Agent,
    Allocation,
    Container,
    Experiment,
    Slot,
    TaskLog,
    Trial,
    User,
)
from stalwart.master.rm.agent.placement import Claimer
from stalwart.master.services import experiments as exp_svc
from stalwart.master.services.agents import set_slot_enabled
from stalwart.master.services.allocations import ack_preemption
from stalwart.master.services.checkpoints import CheckpointReport, report_checkpoint
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.services.metrics import MetricsInput, report_metrics_many
from stalwart.master.services.trials import add_storage_backend
from stalwart.master.state import MasterState
from tests.master.conftest import make_settings

SINGLE = """\
name: loop
entrypoint: python3 train.py
max_restarts: 1
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
"""


@pytest.fixture
def state(tmp_path: Path) -> Iterator[MasterState]:
    st = open_state(make_settings(tmp_path / "home", cluster={"agent_timeout": 60}))
    try:
        yield st
    finally:
        st.engine.dispose()


class FakeNode:
    """The test's side of the agent protocol: what a real agent would report."""

    def __init__(self, state: MasterState, agent_id: str = "n1", slots: int = 1) -> None:
        self.state = state
        self.agent_id = agent_id
        self.slots = [SlotInfo(id=str(i), device_type="cpu") for i in range(slots)]
        self.containers: dict[tuple[str, int], ContainerStatus] = {}

    def sync(self) -> SyncResponse:
        request = SyncRequest(slots=self.slots, containers=list(self.containers.values()))
        with self.state.step() as session:
            response = apply_sync(
                session, self.agent_id, request, kill_grace=1.0, now=self.state.clock.now()
            ).response
        for spec in response.start:
            self.containers[(spec.allocation_id, spec.rank)] = ContainerStatus(
                allocation_id=spec.allocation_id, rank=spec.rank, state="RUNNING", pid=1
            )
        for key in response.forget:
            allocation_id, rank = key.rsplit("/", 1)
            self.containers.pop((allocation_id, int(rank)), None)
        self.last = response
        return response

    def exit(self, allocation_id: str, code: int | None) -> None:
        for (aid, rank), status in list(self.containers.items()):
            if aid == allocation_id:
                self.containers[(aid, rank)] = status.model_copy(
                    update={"state": "EXITED", "exit_code": code}
                )


def _create(state: MasterState, text: str = SINGLE, activate: bool = True) -> int:
    with state.sessions() as session:
        admin = session.scalars(select(User).where(User.username == "admin")).one()
        created = create_experiment(
            session,
            state.settings,
            admin,
            config_text=text,
            model_definition=[],
            activate=activate,
        )
    state.hints.experiment(created.experiment.id)  # as the API does
    return created.experiment.id


@dataclass
class Running:
    """A master loop, one node, and one experiment whose single trial runs on the node."""

    loop: ClusterLoop
    node: FakeNode
    exp_id: int
    spec: TaskSpec


def _running(state: MasterState, text: str = SINGLE) -> Running:
    """Create an experiment and play the node until its trial's container is RUNNING."""
    loop = ClusterLoop(state)
    node = FakeNode(state)
    node.sync()
    exp_id = _create(state, text)
    loop.run_round()
    (spec,) = node.sync().start
    node.sync()  # reports it RUNNING
    return Running(loop, node, exp_id, spec)


def _trials(state: MasterState, exp_id: int) -> list[Trial]:
    with state.sessions() as session:
        return list(session.scalars(select(Trial).where(Trial.experiment_id == exp_id)))


def _exp_state(state: MasterState, exp_id: int) -> str:
    with state.sessions() as session:
        exp = session.get(Experiment, exp_id)
        assert exp is not None
        return exp.state


def _allocations(state: MasterState, task_id: str) -> list[Allocation]:
    with state.sessions() as session:
        return list(
            session.scalars(
                select(Allocation).where(Allocation.task_id == task_id).order_by(Allocation.id)
            )
        )


def test_a_single_trial_runs_on_the_agent_and_completes(state: MasterState) -> None:
    loop = ClusterLoop(state)
    node = FakeNode(state)
    node.sync()
    exp_id = _create(state)
    loop.run_round()
    (trial,) = _trials(state, exp_id)
    (allocation,) = _allocations(state, trial.task_id)
    assert allocation.state == "ASSIGNED"
    (spec,) = node.sync().start
    assert spec.argv == ["sh", "-c", "python3 train.py"]
    assert spec.env["DET_TRIAL_ID"] == str(trial.id)
    assert spec.env["DET_HPARAMS"] == '{"lr": 0.1}'
    assert spec.env["DET_SLOT_IDS"] == "[0]"
    assert "DET_LATEST_CHECKPOINT" not in spec.env
    node.sync()
    assert _allocations(state, trial.task_id)[0].state == "RUNNING"
    assert node.sync().start == []  # a running container is not started twice
    node.exit(allocation.id, 0)
    assert node.sync().forget == [f"{allocation.id}/0"]
    loop.run_round()
    (trial,) = _trials(state, exp_id)
    assert trial.state == "COMPLETED"
    assert _exp_state(state, exp_id) == "COMPLETED"


def test_a_trial_s_spec_names_its_registered_checkpoint_storage(state: MasterState) -> None:
    """Once the experiment's checkpoint storage is registered (``runs/start``), the next
    allocation's spec carries its id, so Stalwart's harness need not register it again."""
    loop = ClusterLoop(state)
    node = FakeNode(state)
    node.sync()
    _create(state)
    loop.run_round()
    (first,) = node.sync().start
    assert "STALWART_STORAGE_ID" not in first.env  # nothing registered it yet
    storage = json.loads(first.env["DET_EXPERIMENT_CONFIG"])["checkpoint_storage"]
    with state.sessions() as session:
        storage_id = add_storage_backend(session, int(first.env["DET_TRIAL_ID"]), storage)
    assert storage_id is not None
    node.exit(first.allocation_id, 3)
    node.sync()
    loop.run_round()
    (restart,) = node.sync().start
    assert restart.env["STALWART_STORAGE_ID"] == str(storage_id)


def test_a_failed_run_restarts_from_the_latest_checkpoint(state: MasterState) -> None:
    loop = ClusterLoop(state)
    node = FakeNode(state)
    node.sync()
    exp_id = _create(state)
    loop.run_round()
    (spec,) = node.sync().start
    with state.sessions() as session:
        report = CheckpointReport(
            uuid="c0ffee00-0000-4000-8000-000000000001",
            state="COMPLETED",
            metadata={"steps_completed": 7},
            resources={"state.json": 10},
            task_id=spec.task_id,
            allocation_id=spec.allocation_id,
        )
        report_checkpoint(session, report, caller_allocation_id=spec.allocation_id)
        session.commit()
    node.exit(spec.allocation_id, 3)
    node.sync()
    loop.run_round()
    (trial,) = _trials(state, exp_id)
    assert trial.state == "ACTIVE"
    assert trial.restarts == 1
    (restart,) = node.sync().start
    assert restart.allocation_id.endswith(".2")
    assert restart.env["DET_LATEST_CHECKPOINT"] == "c0ffee00-0000-4000-8000-000000000001"
    assert restart.env["DET_STEPS_COMPLETED"] == "7"
    assert restart.env["DET_TRIAL_RUN_ID"] == "2"
    assert restart.token != spec.token
    node.exit(restart.allocation_id, 1)  # max_restarts: 1 -> the trial errors
    node.sync()
    loop.run_round()
    (trial,) = _trials(state, exp_id)
    assert trial.state == "ERROR"
    assert _exp_state(state, exp_id) == "ERROR"


def test_pause_preempts_and_activate_resumes(state: MasterState) -> None:
    run = _running(state)
    loop, node, exp_id, spec = run.loop, run.node, run.exp_id, run.spec
    with state.sessions() as session:
        exp_svc.pause_experiment(session, exp_id)
    with state.sessions() as session:
        ack_preemption(session, spec.allocation_id)
        session.commit()
    node.exit(spec.allocation_id, 0)
    node.sync()
    loop.run_round()
    (trial,) = _trials(state, exp_id)
    assert trial.state == "PAUSED"
    assert node.sync().start == []  # nothing runs while paused
    with state.sessions() as session:
        exp_svc.activate_experiment(session, exp_id)
    loop.run_round()
    (resumed,) = node.sync().start
    assert resumed.allocation_id.endswith(".2")


def test_kill_is_sent_to_the_agent(state: MasterState) -> None:
    run = _running(state)
    loop, node, exp_id, spec = run.loop, run.node, run.exp_id, run.spec
    with state.sessions() as session:
        exp_svc.kill_experiment(session, exp_id)
    assert node.sync().kill == [spec.allocation_id]
    node.exit(spec.allocation_id, -15)
    node.sync()
    loop.run_round()
    assert _exp_state(state, exp_id) == "CANCELED"
    (trial,) = _trials(state, exp_id)
    assert trial.state == "CANCELED"


def test_an_unknown_container_is_killed(state: MasterState) -> None:
    node = FakeNode(state)
    node.containers[("9.x.1", 0)] = ContainerStatus(allocation_id="9.x.1", rank=0, state="RUNNING")
    assert node.sync().kill == ["9.x.1"]


def test_a_gang_waits_for_all_its_slots_across_agents(state: MasterState) -> None:
    loop = ClusterLoop(state)
    first = FakeNode(state, "n1", slots=1)
    first.sync()
    exp_id = _create(state, SINGLE.replace("max_restarts: 1", "resources:\n  slots_per_trial: 2"))
    loop.run_round()
    assert first.sync().start == []  # one slot is not enough
    second = FakeNode(state, "n2", slots=1)
    second.sync()
    loop.run_round()
    (a,) = first.sync().start
    (b,) = second.sync().start
    assert {a.rank, b.rank} == {0, 1}
    assert a.token == b.token
    ra, rb = (json.loads(s.info_files["rendezvous.json"]) for s in (a, b))
    assert ra["container_addrs"] == rb["container_addrs"]
    assert len(ra["container_addrs"]) == 2
    assert {ra["container_rank"], rb["container_rank"]} == {a.rank, b.rank}
    assert a.env["C10D_PORT"] == b.env["C10D_PORT"]
    (trial,) = _trials(state, exp_id)
    assert trial.state == "ACTIVE"


def test_master_restart_reattaches_running_containers(state: MasterState) -> None:
    run = _running(state)
    node, spec = run.node, run.spec
    restarted = ClusterLoop(state)  # a new master process: fresh loop, same database
    restarted.run_round()
    response = node.sync()
    assert response.kill == []
    assert response.start == []
    assert _allocations(state, spec.task_id)[0].state == "RUNNING"


class _DiesBeforeItsSearchers(ClusterLoop):
    """A master killed right after a round committed the end of an allocation, before that
    round drove the searchers (the crash is where the process stops, not a patch of what it
    does)."""

    def _drive(
        self, session: Session, hinted: set[int], exits: list[TrialExit], *, sweep: bool
    ) -> None:
        raise _Killed


class _Killed(BaseException):
    pass


def test_a_trial_exit_reaches_the_searcher_across_a_master_kill(state: MasterState) -> None:
    """The trial's end and the searcher's reaction were two transactions; a master killed
    between them left the searcher waiting for the trial forever (its experiment stayed
    ACTIVE). The exit is recorded on the trial and fed by the next master's first round."""
    run = _running(state)
    (trial,) = _trials(state, run.exp_id)
    run.node.exit(run.spec.allocation_id, 0)
    run.node.sync()
    with pytest.raises(_Killed):
        _DiesBeforeItsSearchers(state).run_round()
    (trial,) = _trials(state, run.exp_id)
    assert trial.state == "COMPLETED"
    assert trial.searcher_exit == "EXITED"  # recorded with the end, not yet fed
    assert _exp_state(state, run.exp_id) == "ACTIVE"
    ClusterLoop(state).run_round()  # the next master process
    assert _exp_state(state, run.exp_id) == "COMPLETED"
    (trial,) = _trials(state, run.exp_id)
    assert trial.searcher_exit is None  # fed once


def _state_with(tmp_path: Path, **extra: object) -> MasterState:
    return open_state(make_settings(tmp_path / "home", **extra))


def test_a_master_s_task_port_offset_moves_its_tasks_ports(tmp_path: Path) -> None:
    """Two masters whose tasks share a host (``cluster.task_port_offset`` 0 and 50) give their
    tasks different ports."""
    ports = []
    for offset in (0, 50):
        state = _state_with(tmp_path / str(offset), cluster={"task_port_offset": offset})
        try:
            node = FakeNode(state)
            node.sync()
            _create(state)
            ClusterLoop(state).run_round()
            (spec,) = node.sync().start
            ports.append({name: spec.env[name] for name in ("C10D_PORT", "DET_SERVICE_PORT")})
        finally:
            state.engine.dispose()
    assert ports[0] == {"C10D_PORT": "29400", "DET_SERVICE_PORT": "12370"}
    assert ports[1] == {"C10D_PORT": "30400", "DET_SERVICE_PORT": "13370"}


def test_priority_preemption_hands_the_slot_to_the_urgent_experiment(tmp_path: Path) -> None:
    pools = [{"pool_name": "default", "scheduler": {"type": "priority", "preemption": True}}]
    state = _state_with(tmp_path, resource_pools=pools)
    try:
        loop = ClusterLoop(state)
        node = FakeNode(state)
        node.sync()
        low = _create(state, SINGLE.replace("max_restarts: 1", "resources:\n  priority: 50"))
        loop.run_round()
        (low_spec,) = node.sync().start
        node.sync()
        high = _create(state, SINGLE.replace("max_restarts: 1", "resources:\n  priority: 10"))
        loop.run_round()
        with state.sessions() as session:
            low_alloc = session.get(Allocation, low_spec.allocation_id)
            assert low_alloc is not None
            assert low_alloc.preempt_requested  # asked to checkpoint and give the slot back
            ack_preemption(session, low_spec.allocation_id)
            session.commit()
        node.exit(low_spec.allocation_id, 0)
        node.sync()
        loop.run_round()
        (high_spec,) = node.sync().start
        assert high_spec.env["DET_EXPERIMENT_ID"] == str(high)
        (low_trial,) = _trials(state, low)
        assert low_trial.state == "ACTIVE"  # preempted, not finished: it waits for the slot
        assert low_trial.restarts == 0
        assert [a.state for a in _allocations(state, low_trial.task_id)] == [
            "TERMINATED",
            "PENDING",
        ]
    finally:
        state.engine.dispose()


def test_a_container_an_agent_stops_reporting_is_lost_and_frees_its_slot(
    state: MasterState,
) -> None:
    """The agent restarted within the agent timeout (after killing what its earlier life ran):
    the killed experiment ends, and the queued one gets the freed slot."""
    loop = ClusterLoop(state)
    node = FakeNode(state)
    node.sync()
    killed = _create(state)
    loop.run_round()
    (spec,) = node.sync().start
    node.sync()  # RUNNING
    queued = _create(state)
    loop.run_round()
    assert node.sync().start == []  # one slot: the second experiment waits
    with state.sessions() as session:
        exp_svc.kill_experiment(session, killed)
    loop.run_round()
    restarted = FakeNode(state)  # the same agent id, nothing running any more
    restarted.sync()
    loop.run_round()
    assert _exp_state(state, killed) == "CANCELED"
    (lost,) = _allocations(state, spec.task_id)
    assert lost.state == "TERMINATED"
    (moved,) = restarted.sync().start
    assert moved.env["DET_EXPERIMENT_ID"] == str(queued)


def test_a_start_the_agent_ran_but_never_reported_is_not_run_again(state: MasterState) -> None:
    """The agent started the trial's container and died before its RUNNING report reached the
    master (found by the PostgreSQL chaos soak: the same run started twice, from step 0, and
    its reports stored twice). The restarted agent reports the container exited; the trial
    restarts as a new run, never as the old spec again."""
    loop = ClusterLoop(state)
    node = FakeNode(state)
    node.sync()
    exp_id = _create(state)
    loop.run_round()
    (spec,) = node.sync().start  # the agent starts it; the report of that is lost
    assert spec.env["DET_TRIAL_RUN_ID"] == "1"
    quiet = FakeNode(state)  # an agent that never got the start is sent it again
    assert [s.allocation_id for s in quiet.sync().start] == [spec.allocation_id]
    restarted = FakeNode(state)  # the same agent id: its earlier life ran the spec
    restarted.containers[(spec.allocation_id, 0)] = ContainerStatus(
        allocation_id=spec.allocation_id, rank=0, state="EXITED", exit_reason="lost: restarted"
    )
    answer = restarted.sync()
    assert (answer.start, answer.forget) == ([], [f"{spec.allocation_id}/0"])
    loop.run_round()
    (again,) = restarted.sync().start
    assert again.task_id == spec.task_id
    assert again.allocation_id != spec.allocation_id
    assert again.env["DET_TRIAL_RUN_ID"] == "2"
    (trial,) = _trials(state, exp_id)
    assert (trial.run_id, trial.restarts) == (2, 1)


def test_a_lost_agent_s_trial_restarts_elsewhere_and_the_old_copy_is_killed(
    tmp_path: Path,
) -> None:
    state = _state_with(tmp_path, cluster={"agent_timeout": 20})
    clock = ManualClock()
    state.clock = clock
    state.serving_since = clock.monotonic()  # agents' grace counts from the manual clock
    try:
        loop = ClusterLoop(state)
        lost, spare = FakeNode(state, "lost"), FakeNode(state, "spare")
        lost.sync()
        exp_id = _create(state)
        loop.run_round()
        (spec,) = lost.sync().start
        lost.sync()
        spare.sync()
        clock.advance(30)  # "lost" stays silent for longer than agent_timeout
        spare.sync()
        loop.run_round()
        (trial,) = _trials(state, exp_id)
        assert trial.restarts == 1
        (moved,) = spare.sync().start
        assert moved.task_id == spec.task_id
        assert moved.allocation_id != spec.allocation_id
        assert lost.sync().kill == [spec.allocation_id]  # back again: no trial runs twice
    finally:
        state.engine.dispose()


def test_an_agent_s_grace_after_a_master_restart_counts_from_when_the_master_listens(
    tmp_path: Path,
) -> None:
    """A master whose start took longer than ``agent_timeout`` (a busy machine, a long
    migration) does not count that time against its agents: they cannot sync before it
    listens. Once it listens they get the full timeout to reattach, and no more."""
    state = _state_with(tmp_path, cluster={"agent_timeout": 20})
    clock = ManualClock()
    state.clock = clock
    try:
        loop = ClusterLoop(state)
        node = FakeNode(state)
        node.sync()
        _create(state)
        loop.run_round()
        (spec,) = node.sync().start
        node.sync()
        state.serving_since = None  # the master restarts: its start takes 60 s
        clock.advance(60)
        loop.run_round()
        state.serving_since = clock.monotonic()  # it listens
        clock.advance(19)
        loop.run_round()
        assert node.sync().kill == []  # reattached within the timeout: the trial runs on
        clock.advance(21)  # then silent for longer than the timeout: lost
        loop.run_round()
        assert node.sync().kill == [spec.allocation_id]
    finally:
        state.engine.dispose()


@dataclass
class Canceled:
    """A master on a manual clock whose one trial runs on the node; its experiment was just
    canceled, so the trial's allocation is asked to preempt (and a round has seen it ask)."""

    state: MasterState
    clock: ManualClock
    run: Running


@contextmanager
def _canceled(
    tmp_path: Path, preemption_timeout: float, *, placed_by_full_round: bool = True
) -> Iterator[Canceled]:
    state = _state_with(tmp_path, cluster={"preemption_timeout": preemption_timeout})
    clock = ManualClock()
    state.clock = clock
    try:
        loop = ClusterLoop(state)
        node = FakeNode(state)
        node.sync()
        exp_id = _create(state)
        loop.run_round(full=placed_by_full_round)  # requested in this round: placed in it
        (spec,) = node.sync().start
        node.sync()
        with state.sessions() as session:
            exp_svc.cancel_experiment(session, exp_id)
        loop.run_round()  # first seen asking
        yield Canceled(state, clock, Running(loop, node, exp_id, spec))
    finally:
        state.engine.dispose()


def test_a_task_that_ignores_preemption_is_killed_after_the_timeout(tmp_path: Path) -> None:
    with _canceled(tmp_path, 60) as canceled:
        run, clock = canceled.run, canceled.clock
        clock.advance(59)
        run.loop.run_round()
        assert run.node.sync().kill == []  # still within the preemption timeout
        clock.advance(2)
        run.loop.run_round(housekeeping=False)  # a busy loop's round between housekeeping
        assert run.node.sync().kill == []
        run.loop.run_round()
        assert run.node.sync().kill == [run.spec.allocation_id]
        run.node.exit(run.spec.allocation_id, -9)
        run.node.sync()
        run.loop.run_round()
        assert _exp_state(canceled.state, run.exp_id) == "CANCELED"


def test_the_loop_does_its_housekeeping_on_ticks_and_every_half_second_when_busy(
    state: MasterState,
) -> None:
    loop = ClusterLoop(state)
    assert loop._housekeeping_due(100.0, woken=True)  # the first round
    assert not loop._housekeeping_due(100.2, woken=True)  # woken by an exit, 0.2 s later
    assert not loop._housekeeping_due(100.45, woken=True)
    assert loop._housekeeping_due(100.5, woken=True)  # half a second since the last
    assert loop._housekeeping_due(100.6, woken=False)  # a tick: nothing else to do
    assert not loop._housekeeping_due(100.7, woken=True)


def test_a_validation_without_the_searcher_metric_errors_the_experiment(
    state: MasterState,
) -> None:
    loop = ClusterLoop(state)
    node = FakeNode(state)
    node.sync()
    asha = SINGLE.replace(
        "  name: single\n  metric: loss\n",
        "  name: async_halving\n  metric: loss\n  time_metric: batches\n  max_time: 8\n"
        "  max_trials: 2\n  num_rungs: 2\n",
    )
    exp_id = _create(state, asha)
    loop.run_round()
    specs = node.sync().start
    assert specs
    with state.sessions() as session:
        report = MetricsInput(
            trial_id=int(specs[0].env["DET_TRIAL_ID"]),
            run_id=1,
            group="validation",
            steps_completed=4,
            avg_metrics={"accuracy": 0.5},
        )
        report_metrics_many(session, [report])
    state.hints.experiment(exp_id)
    loop.run_round()
    assert _exp_state(state, exp_id) == "STOPPING_ERROR"
    for spec in specs:
        node.exit(spec.allocation_id, 0)
    node.sync()
    loop.run_round()
    assert _exp_state(state, exp_id) == "ERROR"
    with state.sessions() as session:
        text = "".join(
            line.log for line in session.scalars(select(TaskLog).where(TaskLog.source == "master"))
        )
    assert "must carry the searcher metric 'loss'" in text


def test_a_trial_that_cannot_fit_says_why_once(state: MasterState) -> None:
    loop = ClusterLoop(state)
    FakeNode(state, "n1", slots=1).sync()
    exp_id = _create(state, SINGLE.replace("max_restarts: 1", "resources:\n  slots_per_trial: 3"))
    loop.run_round()
    loop.run_round()
    (trial,) = _trials(state, exp_id)
    with state.sessions() as session:
        lines = [
            row.log
            for row in session.scalars(select(TaskLog).where(TaskLog.task_id == trial.task_id))
        ]
    assert lines == [
        "waiting: the trial needs 3 cpu slots but resource pool 'default' has 1 in total; "
        "add agents or lower resources.slots_per_trial\n"
    ]


def _task_lines(state: MasterState, task_id: str) -> list[tuple[str, str | None]]:
    with state.sessions() as session:
        rows = session.scalars(
            select(TaskLog).where(TaskLog.task_id == task_id).order_by(TaskLog.id)
        )
        return [(row.log, row.agent_id) for row in rows]


def test_the_last_lines_sent_with_an_exit_are_stored_once_with_it(state: MasterState) -> None:
    run = _running(state)
    allocation_id = run.spec.allocation_id
    line = LogLine(
        log="bye\n", timestamp="2026-01-01T00:00:00Z", container_id=run.spec.container_id
    )
    status = run.node.containers[(allocation_id, 0)]
    exited = status.model_copy(update={"state": "EXITED", "exit_code": 0, "logs": [line]})
    request = SyncRequest(slots=run.node.slots, containers=[exited])
    for _ in range(2):  # the second report repeats the first (its answer was lost)
        with state.sessions() as session:
            outcome = apply_sync(session, run.node.agent_id, request, kill_grace=1.0)
        assert outcome.response.forget == [f"{allocation_id}/0"]
    # Stored once, as the agent's, with the exit (the first outcome named the task).
    assert _task_lines(state, run.spec.task_id) == [("bye\n", run.node.agent_id)]
    run.loop.run_round()
    assert _exp_state(state, run.exp_id) == "COMPLETED"


def test_an_answer_without_recording_writes_nothing(state: MasterState) -> None:
    run = _running(state)
    allocation_id = run.spec.allocation_id
    status = run.node.containers[(allocation_id, 0)]
    exited = status.model_copy(update={"state": "EXITED", "exit_code": 0})
    request = SyncRequest(slots=run.node.slots, containers=[exited])
    with state.sessions() as session:
        outcome = apply_sync(session, "n1", request, kill_grace=1.0, record=False)
    assert outcome.response.forget == [f"{allocation_id}/0"]
    assert not outcome.changed
    assert _allocations(state, run.spec.task_id)[0].state == "RUNNING"  # the exit is not recorded
    with state.sessions() as session:
        outcome = apply_sync(session, "n1", request, kill_grace=1.0)
    assert outcome.changed


def test_every_round_is_counted(state: MasterState) -> None:
    loop = ClusterLoop(state)
    before = state.hints.rounds_done
    loop.run_round()
    loop.run_round()
    assert state.hints.rounds_done == before + 2


def test_a_repeated_report_only_heartbeats_and_a_changed_one_registers(state: MasterState) -> None:
    """The report an agent registered with is remembered on its row: a repeat only heartbeats
    (a slot's stored facts are not rewritten), a changed one registers, and a report that
    comes back after another one registers again, whichever master process records it (there
    is no memory per process: several workers see one truth)."""
    clock = ManualClock()

    def sync(slots: int) -> None:
        request = SyncRequest(slots=[SlotInfo(id=str(i), device_type="cpu") for i in range(slots)])
        with state.sessions() as session:
            apply_sync(session, "n1", request, kill_grace=1.0, now=clock.now())

    def seen() -> tuple[float, list[str]]:
        with state.sessions() as session:
            agent = session.get(Agent, "n1")
            assert agent is not None
            slots = session.scalars(
                select(Slot).where(Slot.agent_id == "n1").order_by(Slot.slot_id)
            )
            return agent.last_heartbeat.timestamp(), [s.device_brand for s in slots]

    def mark_brands() -> None:  # what only a registration would overwrite
        with state.sessions() as session:
            for slot in session.scalars(select(Slot).where(Slot.agent_id == "n1")):
                slot.device_brand = "marked"
            session.commit()

    sync(2)
    first, brands = seen()
    assert brands == ["", ""]
    mark_brands()
    clock.advance(1)
    sync(2)
    again, brands = seen()
    assert (again > first, brands) == (True, ["marked", "marked"])  # heartbeat only
    sync(3)  # the agent came back with another slot: registered again
    assert seen()[1] == ["", "", ""]
    sync(2)  # and back to two (a per-process memory of "two" would have skipped this)
    assert seen()[1] == ["", ""]


RANDOM_4 = """\
name: four
entrypoint: python3 train.py
max_restarts: 0
hyperparameters:
  lr: {type: double, minval: 0.0, maxval: 1.0}
searcher:
  name: random
  metric: loss
  max_trials: 8
  max_concurrent_trials: 4
"""


def test_the_slots_a_round_frees_are_all_refilled_by_it_on_distinct_ports(
    state: MasterState,
) -> None:
    """Four trials end at once: one round ends them, has the searcher create their four
    successors and places each on a freed slot (one transaction for the four claims), every
    one with ports of its own."""
    loop = ClusterLoop(state)
    node = FakeNode(state, slots=4)
    node.sync()
    exp_id = _create(state, RANDOM_4)
    loop.run_round()
    first = node.sync().start
    assert len(first) == 4
    node.sync()
    for spec in first:
        node.exit(spec.allocation_id, 0)
    node.sync()
    loop.run_round()
    second = node.sync().start
    assert len(second) == 4
    assert {s.allocation_id for s in second}.isdisjoint({s.allocation_id for s in first})
    assert sorted(s.env["DET_SLOT_IDS"] for s in second) == ["[0]", "[1]", "[2]", "[3]"]
    assert len({s.env["DET_SERVICE_PORT"] for s in second}) == 4
    assert len({s.env["C10D_PORT"] for s in second}) == 4
    states = [t.state for t in _trials(state, exp_id)]
    assert sorted(states) == ["ACTIVE"] * 4 + ["COMPLETED"] * 4


def test_a_claim_the_database_refuses_is_undone_and_the_others_kept(state: MasterState) -> None:
    """A decision is claimed in one transaction; a slot taken since the snapshot (a stale
    decision) skips that claim only, leaving nothing of it behind."""
    loop = ClusterLoop(state)
    node = FakeNode(state, slots=2)
    node.sync()
    _create(state)
    loop.run_round()
    (running,) = node.sync().start
    taken = json.loads(running.env["DET_SLOT_IDS"])[0]
    free = str(1 - taken)
    with state.sessions() as session:  # the free slot is disabled: the next two wait
        set_slot_enabled(session, "n1", free, enabled=False, drain=False)
        session.commit()
    waiting = [_create(state), _create(state)]
    loop.run_round()
    with state.sessions() as session:
        set_slot_enabled(session, "n1", free, enabled=True, drain=False)
        session.commit()
        pending = [
            a.id
            for a in session.scalars(
                select(Allocation)
                .join(Trial, Trial.task_id == Allocation.task_id)
                .where(Trial.experiment_id.in_(waiting))
                .order_by(Trial.experiment_id)
            )
        ]
    assert len(pending) == 2
    with state.step() as session:  # a stale decision: the first onto the running trial's slot
        claimer = Claimer(session, cluster_id=state.cluster_id)
        claimed = claimer.claim_all(
            {pending[0]: (("n1", (str(taken),)),), pending[1]: (("n1", (free,)),)}
        )
        session.commit()
    assert [c.allocation_id for c in claimed] == [pending[1]]
    with state.sessions() as session:
        refused = session.get(Allocation, pending[0])
        assert refused is not None
        assert (refused.state, refused.ports, refused.token_sha256 is not None) == (
            "PENDING",
            None,
            True,
        )
        assert not session.scalars(
            select(Container).where(Container.allocation_id == pending[0])
        ).all()
        holders = {s.slot_id: s.allocation_id for s in session.scalars(select(Slot))}
    assert holders == {str(taken): running.allocation_id, free: pending[1]}


def test_a_round_woken_by_a_hint_alone_leaves_timeouts_to_the_next_full_round(
    tmp_path: Path,
) -> None:
    """A round the loop runs for experiment hints alone (a validation report) within a tick
    of the last full round still places what it requested, but leaves the preemption timeout
    to the next full round."""
    with _canceled(tmp_path, 1, placed_by_full_round=False) as canceled:
        run = canceled.run
        canceled.clock.advance(2)  # past the timeout, within a sweep's 5 s
        run.loop.run_round(full=False)
        assert run.node.sync().kill == []
        run.loop.run_round()
        assert run.node.sync().kill == [run.spec.allocation_id]
