"""The PBS resource manager (``resource_manager: {type: pbs}``) in the cluster loop, on a fake
PBS server (:mod:`tests.slurm.fakepbs`) behind the real :class:`~stalwart.hpc.pbs.client.
PbsClient`. It is the Slurm manager's logic (:class:`~stalwart.master.rm.hpc.manager.HpcManager`)
with PBS's commands: qsub, one ``qstat -x -f -F json`` per poll, qdel. Each ``run_round()`` is one
round of the loop; the launcher's calls are played through the ``batch/*`` services."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from stalwart.hpc.pbs.client import PbsClient
from stalwart.master.app import open_state
from stalwart.master.clock import ManualClock
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import Allocation, Container, Experiment, TaskLog, Trial, User
from stalwart.master.rm import batchjobs
from stalwart.master.rm.hpc.manager import PbsManager
from stalwart.master.services import experiments as exp_svc
from stalwart.master.services import interactive
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.state import MasterState
from tests.master.conftest import make_settings
from tests.slurm.fakepbs import FakePbs

CONFIG = """\
name: pbs
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
    settings = make_settings(
        tmp_path / "home",
        resource_manager={
            "type": "pbs",
            "job_storage_root": str(tmp_path / "jobs"),
            "master_url": "http://head:8080",
            "poll_interval": 0.001,
            "stuck_job_timeout": 60,
        },
    )
    st = open_state(settings)
    try:
        yield st
    finally:
        st.engine.dispose()


@pytest.fixture
def pbs() -> FakePbs:
    return FakePbs()


@pytest.fixture
def loop(state: MasterState, pbs: FakePbs) -> ClusterLoop:
    assert isinstance(state.rm, PbsManager)  # chosen from resource_manager.type
    state.rm = PbsManager(state, client=PbsClient(pbs.runner))
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
        found = session.scalars(select(Allocation).order_by(Allocation.id.desc())).first()
        assert found is not None
        return found


def _states(state: MasterState, exp_id: int) -> tuple[str, str]:
    with state.sessions() as session:
        exp = session.get(Experiment, exp_id)
        trial = session.scalars(select(Trial).where(Trial.experiment_id == exp_id)).one()
        assert exp is not None
        return exp.state, trial.state


def _logs(state: MasterState) -> str:
    with state.sessions() as session:
        return "".join(session.scalars(select(TaskLog.log).order_by(TaskLog.id)))


def test_a_trial_is_qsubbed_runs_and_completes(
    state: MasterState, loop: ClusterLoop, pbs: FakePbs, tmp_path: Path
) -> None:
    text = CONFIG + "pbs:\n  pbsbatch_args: ['-l walltime=01:00:00', '-A proj']\n"
    exp_id = _create(state, text)
    loop.run_round()
    allocation = _allocation(state)
    assert allocation.batch_job_id == "100.pbs-head"
    (script,) = pbs.scripts
    assert f"#PBS -N stalwart-{allocation.id}" in script
    assert "#PBS -r n" in script
    assert "#PBS -l walltime=01:00:00" in script.split("# pbs.pbsbatch_args")[1]
    assert "export STALWART_MASTER_URL=http://head:8080" in script
    token = tmp_path / "jobs" / allocation.id / "token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert token.read_text().strip() not in script
    pbs.jobs["100.pbs-head"].state = "R"
    pbs.jobs["100.pbs-head"].run_count = 1
    loop.run_round()
    assert _allocation(state).state == "RUNNING"
    with state.sessions() as session:  # the launcher's batch/exit
        batchjobs.mark_exited(session, allocation.id, 0, None, [0])
        session.commit()
    pbs.jobs["100.pbs-head"].state, pbs.jobs["100.pbs-head"].exit_status = "F", 0
    loop.run_round()
    assert _states(state, exp_id) == ("COMPLETED", "COMPLETED")
    assert "submitted as PBS job 100.pbs-head" in _logs(state)
    assert all(call[:2] != ("qstat", "-f") for call in pbs.runner.calls)  # no listing needed


def test_a_job_pbs_ends_without_a_report_restarts_the_trial(
    state: MasterState, loop: ClusterLoop, pbs: FakePbs
) -> None:
    exp_id = _create(state)
    loop.run_round()
    pbs.jobs["100.pbs-head"].state, pbs.jobs["100.pbs-head"].exit_status = "F", -29
    loop.run_round()
    loop.run_round()
    assert "PBS job 100.pbs-head reached its walltime and was killed" in _logs(state)
    with state.sessions() as session:
        trial = session.scalars(select(Trial).where(Trial.experiment_id == exp_id)).one()
        assert trial.restarts == 1
    assert len(pbs.scripts) == 2  # a new job for the restart


def test_kill_qdels_the_job(state: MasterState, loop: ClusterLoop, pbs: FakePbs) -> None:
    exp_id = _create(state)
    loop.run_round()
    pbs.jobs["100.pbs-head"].state = "R"
    loop.run_round()
    with state.sessions() as session:
        exp_svc.kill_experiment(session, exp_id)
    loop.run_round()
    loop.run_round()
    assert ("qdel", "100.pbs-head") in pbs.runner.calls
    assert _states(state, exp_id) == ("CANCELED", "CANCELED")


def test_a_qsub_refusal_errors_the_trial_at_once(
    state: MasterState, loop: ClusterLoop, pbs: FakePbs
) -> None:
    pbs.reject = "Unknown queue"
    exp_id = _create(state)
    loop.run_round()
    loop.run_round()
    assert _states(state, exp_id) == ("ERROR", "ERROR")
    assert "PBS rejected the job: qsub: Unknown queue" in _logs(state)


def test_forbidden_pbsbatch_args_are_refused_before_qsub(
    state: MasterState, loop: ClusterLoop, pbs: FakePbs
) -> None:
    exp_id = _create(state, CONFIG + "pbs:\n  pbsbatch_args: ['-q gpu', '-l select=2']\n")
    loop.run_round()
    loop.run_round()
    assert _states(state, exp_id) == ("ERROR", "ERROR")
    logs = _logs(state)
    assert "the PBS job cannot be built" in logs
    assert "-q" in logs
    assert "select" in logs
    assert pbs.runner.count("qsub") == 0


def test_a_held_job_is_cancelled_after_stuck_job_timeout(
    state: MasterState, loop: ClusterLoop, pbs: FakePbs
) -> None:
    assert isinstance(loop.rm, PbsManager)
    clock = ManualClock()
    state.clock = clock
    exp_id = _create(state)
    loop.run_round()
    pbs.jobs["100.pbs-head"].state = "H"
    loop.run_round()
    assert "will not start: queued: held (release it with qrls)" in _logs(state)
    assert pbs.runner.count("qdel") == 0
    clock.advance(61)
    loop.run_round()
    assert ("qdel", "100.pbs-head") in pbs.runner.calls
    assert _states(state, exp_id) == ("ERROR", "ERROR")
    assert "cancelled after waiting 60 s (resource_manager.stuck_job_timeout)" in _logs(state)


MULTI = CONFIG.replace("max_restarts: 1", "max_restarts: 1\nresources:\n  slots_per_trial: 3") + (
    "pbs:\n  slots_per_node: 2\n"
)


def test_a_multi_node_trial_gets_one_container_per_node_and_their_addresses(
    state: MasterState, loop: ClusterLoop, pbs: FakePbs
) -> None:
    _create(state, MULTI)
    loop.run_round()
    allocation = _allocation(state)
    (script,) = pbs.scripts
    assert "#PBS -l select=2:ncpus=2:mpiprocs=1" in script
    assert "pbsdsh -u" in script
    with state.sessions() as session:
        rows = session.scalars(
            select(Container).where(Container.allocation_id == allocation.id)
        ).all()
        assert [(r.rank, len(r.slot_ids)) for r in rows] == [(0, 2), (1, 1)]
        # Rank 1 reports first; nobody gets a spec until every node has reported.
        batchjobs.record_node(session, allocation.id, 1, "cn2", "10.0.0.2")
        session.commit()
        assert batchjobs.rendezvous_spec(session, allocation.id, 1) == ({}, [0])
        batchjobs.record_node(session, allocation.id, 0, "cn1", "10.0.0.1")
        session.commit()
        specs = [batchjobs.rendezvous_spec(session, allocation.id, r)[0] for r in (0, 1)]
    for rank, spec in enumerate(specs):
        rendezvous = json.loads(spec["info_files"]["rendezvous.json"])
        assert rendezvous["container_addrs"] == ["10.0.0.1", "10.0.0.2"]
        assert rendezvous["container_rank"] == rank
        assert rendezvous["container_slot_counts"] == [2, 1]
        assert "batch_node" not in spec  # the master's bookkeeping stays on the master


def test_jobs_that_may_share_a_node_get_their_own_ports(
    state: MasterState, loop: ClusterLoop
) -> None:
    _create(state)
    _create(state)
    loop.run_round()
    with state.sessions() as session:
        ports = [a.ports or {} for a in session.scalars(select(Allocation)).all()]
    assert len(ports) == 2
    assert ports[0]["offset"] != ports[1]["offset"]
    assert ports[0]["C10D_PORT"] != ports[1]["C10D_PORT"]


def _launch_command(state: MasterState, config: dict[str, object]) -> str:
    with state.sessions() as session:
        admin = session.scalars(select(User).where(User.username == "admin")).one()
        task, _ = interactive.launch_task(
            session, state.settings, admin, interactive.Launch(kind="COMMAND", config=config)
        )
        session.commit()
        return task.task_id


def test_a_command_is_qsubbed_with_its_own_pbs_section_on_one_node(
    state: MasterState, loop: ClusterLoop, pbs: FakePbs
) -> None:
    task_id = _launch_command(
        state,
        {"entrypoint": "echo hi", "resources": {"slots": 0}, "pbs": {"pbsbatch_args": ["-A proj"]}},
    )
    loop.run_round()
    allocation = _allocation(state)
    assert allocation.task_id == task_id
    (script,) = pbs.scripts
    assert "#PBS -A proj" in script.split("# pbs.pbsbatch_args")[1]
    assert "#PBS -r n" in script
    assert "select=1:" in script
    assert "ngpus" not in script  # no slots: no GPU
    job = allocation.batch_job_id
    assert job is not None
    pbs.jobs[job].state = "R"
    loop.run_round()
    with state.sessions() as session:  # the launcher's batch/exit
        batchjobs.mark_exited(session, allocation.id, 0, None, [0])
        session.commit()
    pbs.jobs[job].state, pbs.jobs[job].exit_status = "F", 0
    loop.run_round()
    with state.sessions() as session:
        ended = session.get(Allocation, allocation.id)
        assert ended is not None
        assert (ended.state, ended.exit_code) == ("TERMINATED", 0)


def test_a_command_needing_two_nodes_is_refused_before_qsub(
    state: MasterState, loop: ClusterLoop, pbs: FakePbs
) -> None:
    _launch_command(
        state, {"entrypoint": "echo hi", "resources": {"slots": 2}, "pbs": {"slots_per_node": 1}}
    )
    loop.run_round()
    loop.run_round()
    assert not pbs.scripts
    allocation = _allocation(state)
    assert allocation.state == "TERMINATED"
    assert "runs on one node" in (allocation.exit_reason or "")
