"""The Slurm resource manager in the cluster loop, with a fake Slurm (no Slurm needed).

``FakeSlurm`` stands in for :class:`~stalwart.hpc.slurm.client.SlurmClient`: it records
submissions and cancellations and answers squeue/sacct from a dict the test edits, and sinfo
from ``nodes`` (a CPU partition ``debug``, the default, and a GPU partition ``gpu``). The launcher's
calls are played through the same services the ``batch/start`` and ``batch/exit`` routes use.
Each ``run_round()`` is one round of the loop. Real Slurm: ``tests/slurm/test_master_slurm.py``.
"""

from __future__ import annotations

import stat
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from stalwart.agent.protocol import TaskSpec
from stalwart.hpc.errors import HpcCommandError
from stalwart.hpc.layout import BatchRequest
from stalwart.hpc.slurm.client import SlurmClient
from stalwart.hpc.slurm.parse import SacctRecord, SinfoNode, SqueueRecord
from stalwart.hpc.slurm.script import render_sbatch_script
from stalwart.master.app import open_state
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import Allocation, Container, Experiment, TaskLog, Trial, User
from stalwart.master.rm import batchjobs
from stalwart.master.rm.hpc.manager import SlurmManager
from stalwart.master.services import experiments as exp_svc
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState
from tests.master.conftest import make_settings

CONFIG = """\
name: slurm
entrypoint: python3 train.py
max_restarts: 1
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
"""


class FakeSlurm(SlurmClient):
    """Submissions get ids 100, 101...; ``jobs`` maps id -> (state, exit code) for squeue/sacct."""

    def __init__(self) -> None:
        super().__init__(accounting="jobcomp")
        self.submitted: list[BatchRequest] = []
        self.cancelled: list[str] = []
        self.jobs: dict[str, tuple[str, str]] = {}
        self.names: dict[str, str] = {}
        self.reject: str | None = None
        self.sinfo_calls = 0
        self.nodes = [
            SinfoNode("n1", "debug", True, 8, 1000, "(null)", "idle", "infinite", 0, 8, 0, ()),
            SinfoNode(
                "g1", "gpu", False, 8, 1000, "gpu:a100:4", "mixed", "1:00:00", 2, 6, 4, ("a100",)
            ),
        ]

    def sinfo(self) -> list[SinfoNode]:
        self.sinfo_calls += 1
        return list(self.nodes)

    def submit(self, request: BatchRequest) -> str:
        render_sbatch_script(request, self.options)  # the real checks of the arguments
        if self.reject:
            raise HpcCommandError(["sbatch"], 1, self.reject)
        job_id = str(100 + len(self.submitted))
        self.submitted.append(request)
        self.jobs[job_id] = ("PENDING", "")
        self.names[job_id] = request.job_name
        return job_id

    def cancel(self, job_ids: Collection[str]) -> None:
        self.cancelled += list(job_ids)
        for job_id in job_ids:
            self.jobs[job_id] = ("CANCELLED", "0:15")

    def squeue(self) -> list[SqueueRecord]:
        return [
            SqueueRecord(job, state, "None", 0, "debug", 1, "n1", "", "", "", self.names[job])
            for job, (state, _) in self.jobs.items()
        ]

    def finished(self, job_ids: Collection[str]) -> list[SacctRecord]:
        return [
            SacctRecord(job, self.jobs[job][0], self.jobs[job][1], "debug", 1, "n1", "", "", "", "")
            for job in job_ids
            if job in self.jobs
        ]


def _settings(home: Path, jobs_root: Path) -> MasterSettings:
    return make_settings(
        home,
        resource_manager={
            "type": "slurm",
            "job_storage_root": str(jobs_root),
            "master_url": "http://head:8080",
            "poll_interval": 0.001,
        },
    )


@pytest.fixture
def state(tmp_path: Path) -> Iterator[MasterState]:
    st = open_state(_settings(tmp_path / "home", tmp_path / "jobs"))
    try:
        yield st
    finally:
        st.engine.dispose()


@pytest.fixture
def fake() -> FakeSlurm:
    return FakeSlurm()


@pytest.fixture
def loop(state: MasterState, fake: FakeSlurm) -> ClusterLoop:
    assert isinstance(state.rm, SlurmManager)  # built from resource_manager.type
    state.rm = SlurmManager(state, client=fake)
    return ClusterLoop(state)


def _create(state: MasterState, text: str = CONFIG) -> int:
    with state.sessions() as session:
        admin = session.scalars(select(User).where(User.username == "admin")).one()
        created = create_experiment(
            session, state.settings, admin, config_text=text, model_definition=[], activate=True
        )
    state.hints.experiment(created.experiment.id)
    return created.experiment.id


def _allocation(state: MasterState) -> Allocation:
    with state.sessions() as session:
        return session.scalars(select(Allocation).order_by(Allocation.id.desc())).first()  # type: ignore[return-value]


def _launcher_start(state: MasterState, allocation_id: str) -> TaskSpec:
    """What ``batch/start`` does for rank 0."""
    with state.sessions() as session:
        allocation = session.get(Allocation, allocation_id)
        row = session.get(Container, (allocation_id, 0))
        assert allocation is not None
        assert row is not None
        batchjobs.mark_running(session, allocation, 0)
        session.commit()
        return TaskSpec.model_validate(row.spec)


def _launcher_exit(state: MasterState, allocation_id: str, code: int | None) -> None:
    with state.sessions() as session:
        batchjobs.mark_exited(session, allocation_id, code, None, [0])
        session.commit()


def _states(state: MasterState, exp_id: int) -> tuple[str, str]:
    with state.sessions() as session:
        exp = session.get(Experiment, exp_id)
        trial = session.scalars(select(Trial).where(Trial.experiment_id == exp_id)).one()
        assert exp is not None
        return exp.state, trial.state


def _logs(state: MasterState) -> str:
    with state.sessions() as session:
        return "".join(session.scalars(select(TaskLog.log).order_by(TaskLog.id)))


def test_settings_default_to_agents_and_validate_slurm(tmp_path: Path) -> None:
    assert make_settings(tmp_path).resource_manager.type == "agent"
    slurm = _settings(tmp_path, tmp_path / "jobs").resource_manager
    assert slurm.type == "slurm"
    with pytest.raises(ValueError, match="job_storage_root"):
        make_settings(tmp_path, resource_manager={"type": "slurm"})


def test_a_trial_is_submitted_runs_and_completes(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm, tmp_path: Path
) -> None:
    exp_id = _create(state)
    loop.run_round()
    (request,) = fake.submitted
    allocation = _allocation(state)
    assert allocation.state == "ASSIGNED"
    assert allocation.batch_job_id == "100"
    assert request.command[1:] == ("-m", "stalwart.hpc.task")
    assert dict(request.env)["STALWART_MASTER_URL"] == "http://head:8080"
    assert request.partition is None
    assert request.slot_type == "cpu"
    token = tmp_path / "jobs" / allocation.id / "token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    spec = _launcher_start(state, allocation.id)
    assert spec.token == token.read_text().strip()
    assert spec.env["DET_ALLOCATION_ID"] == allocation.id
    assert _allocation(state).state == "RUNNING"
    fake.jobs["100"] = ("RUNNING", "")
    loop.run_round()
    _launcher_exit(state, allocation.id, 0)
    fake.jobs["100"] = ("COMPLETED", "0:0")
    loop.run_round()
    assert _allocation(state).state == "TERMINATED"
    assert _states(state, exp_id) == ("COMPLETED", "COMPLETED")
    assert "submitted as Slurm job 100" in _logs(state)


def test_a_job_that_fails_without_reporting_restarts_the_trial(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    exp_id = _create(state)
    loop.run_round()
    fake.jobs["100"] = ("FAILED", "3:0")  # the launcher never reported: Slurm's word counts
    loop.run_round()
    first = _allocation(state)
    assert first.batch_job_id == "101"  # the restart was submitted in the same round
    with state.sessions() as session:
        trial = session.scalars(select(Trial).where(Trial.experiment_id == exp_id)).one()
        assert trial.restarts == 1
    assert "Slurm job 100 failed: exited with code 3" in _logs(state)


def test_a_job_slurm_preempted_resumes_without_using_a_restart(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    exp_id = _create(state)
    loop.run_round()
    _launcher_start(state, _allocation(state).id)
    fake.jobs["100"] = ("RUNNING", "")
    loop.run_round()
    fake.jobs["100"] = ("PREEMPTED", "0:15")  # an urgent job took the node; no report
    loop.run_round()
    assert _allocation(state).batch_job_id == "101"  # resumed through a new job at once
    with state.sessions() as session:
        trial = session.scalars(select(Trial).where(Trial.experiment_id == exp_id)).one()
        assert trial.restarts == 0
        assert trial.state == "ACTIVE"
    assert "was preempted" in _logs(state)


def test_pools_come_from_sinfo_and_gres_decides_the_slot_type(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    manager = loop.rm
    assert isinstance(manager, SlurmManager)
    pools = {p.name: p for p in manager.pools()}
    assert (pools["debug"].slot_type, pools["debug"].slots, pools["debug"].default) == (
        "cpu",
        8,
        True,
    )
    assert (pools["gpu"].slot_type, pools["gpu"].slots, pools["gpu"].gpu_types) == (
        "cuda",
        4,
        ("a100",),
    )
    _create(state, CONFIG + "resources:\n  resource_pool: gpu\n")
    loop.run_round()
    (request,) = fake.submitted
    assert (request.partition, request.slot_type) == ("gpu", "cuda")
    assert fake.sinfo_calls == 1  # read once, not per round or per job
    loop.run_round()
    manager.pools()
    assert fake.sinfo_calls == 1


def test_partition_overrides_win_over_gres(tmp_path: Path, fake: FakeSlurm) -> None:
    settings = make_settings(
        tmp_path / "home",
        resource_manager={
            "type": "slurm",
            "job_storage_root": str(tmp_path / "jobs"),
            "partition_overrides": {"gpu": {"slot_type": "rocm"}},
        },
    )
    st = open_state(settings)
    try:
        pools = {p.name: p for p in SlurmManager(st, client=fake).pools()}
    finally:
        st.engine.dispose()
    assert pools["gpu"].slot_type == "rocm"
    assert pools["debug"].slot_type == "cpu"


def test_a_failed_sinfo_keeps_the_last_pools(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    manager = loop.rm
    assert isinstance(manager, SlurmManager)
    assert len(manager.pools()) == 2

    def broken() -> list[SinfoNode]:
        raise HpcCommandError(["sinfo"], 1, "slurm_load_partitions: Unable to contact slurm")

    fake.sinfo = broken  # type: ignore[method-assign]
    assert [p.name for p in manager.pools(refresh=True)] == ["debug", "gpu"]


def test_kill_cancels_queued_and_running_jobs(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    exp_id = _create(state)
    loop.run_round()
    with state.sessions() as session:
        exp_svc.kill_experiment(session, exp_id)
    loop.run_round()
    assert fake.cancelled == ["100"]
    assert _states(state, exp_id) == ("CANCELED", "CANCELED")
    assert _allocation(state).state == "TERMINATED"


def test_cancel_of_a_queued_job_does_not_wait_for_a_checkpoint(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    exp_id = _create(state)
    loop.run_round()
    with state.sessions() as session:
        exp_svc.cancel_experiment(session, exp_id)
    loop.run_round()
    assert fake.cancelled == ["100"]
    assert _states(state, exp_id) == ("CANCELED", "CANCELED")


def test_slurm_rejection_errors_the_trial_at_once(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    fake.reject = "sbatch: error: Batch job submission failed: Invalid feature specification"
    exp_id = _create(state)
    loop.run_round()
    loop.run_round()
    assert _states(state, exp_id) == ("ERROR", "ERROR")
    logs = _logs(state)
    assert "Slurm rejected the job: sbatch: error: Batch job submission failed" in logs
    assert "retrying cannot help: ERROR" in logs


def test_forbidden_sbatch_args_are_rejected_before_sbatch(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    exp_id = _create(state, CONFIG + "slurm:\n  sbatch_args: ['--ntasks=4']\n")
    loop.run_round()
    loop.run_round()
    assert fake.submitted == []
    assert _states(state, exp_id) == ("ERROR", "ERROR")
    assert "the Slurm job cannot be built" in _logs(state)


def test_a_transient_sbatch_failure_is_retried_and_a_submitted_job_adopted(
    state: MasterState, loop: ClusterLoop, fake: FakeSlurm
) -> None:
    _create(state)
    fake.reject = "sbatch: error: Socket timed out on send/recv operation"
    loop.run_round()
    allocation = _allocation(state)
    assert allocation.state == "ASSIGNED"
    assert allocation.batch_job_id is None
    # Slurm took the job although sbatch timed out: the next round adopts it from squeue.
    fake.jobs["777"] = ("PENDING", "")
    fake.names["777"] = f"stalwart-{allocation.id}"
    fake.reject = None
    loop.run_round()
    assert _allocation(state).batch_job_id == "777"
    assert fake.submitted == []
