"""The PBS client and tracker on a fake PBS (:mod:`tests.slurm.fakepbs`) and the hand-written
``qstat -x -f -F json`` sample: one qstat per poll whatever the number of jobs."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from stalwart.hpc.errors import HpcCommandError, SchedulerArgsError
from stalwart.hpc.layout import BatchRequest
from stalwart.hpc.pbs.client import PbsClient, PbsTracker
from stalwart.hpc.runner import ReplayRunner
from stalwart.hpc.states import Outcome
from tests.slurm.conftest import fixture_text
from tests.slurm.fakepbs import FakePbs, PbsJobRow


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _request(tmp_path: Path, allocation: str = "a1", **extra: object) -> BatchRequest:
    fields: dict[str, object] = {
        "allocation_id": allocation,
        "slots": 2,
        "slot_type": "cpu",
        "command": ("python3", "-m", "stalwart.hpc.task"),
        "job_storage_root": PurePosixPath(str(tmp_path)),
        **extra,
    }
    return BatchRequest(**fields)  # type: ignore[arg-type]


def test_submit_writes_the_script_and_returns_qsubs_job_id(tmp_path: Path) -> None:
    pbs = FakePbs()
    job_id = PbsClient(pbs.runner).submit(_request(tmp_path))
    assert job_id == "100.pbs-head"
    script = (tmp_path / "a1" / "job.pbs").read_text()
    assert "#PBS -N stalwart-a1" in script
    assert "#PBS -l select=1:ncpus=2:mpiprocs=1" in script
    assert pbs.runner.calls[-1] == ("qsub", str(tmp_path / "a1" / "job.pbs"))


def test_forbidden_pbsbatch_args_fail_before_qsub(tmp_path: Path) -> None:
    pbs = FakePbs()
    with pytest.raises(SchedulerArgsError, match="-q"):
        PbsClient(pbs.runner).submit(_request(tmp_path, scheduler_args=("-q gpu",)))
    assert pbs.runner.calls == []


def test_a_qsub_refusal_carries_pbs_message(tmp_path: Path) -> None:
    pbs = FakePbs(reject="Unknown queue")
    with pytest.raises(HpcCommandError, match="Unknown queue") as caught:
        PbsClient(pbs.runner).submit(_request(tmp_path))
    assert not caught.value.retryable


def test_qstat_reads_the_sample_and_tolerates_purged_ids() -> None:
    runner = ReplayRunner()
    runner.reply(
        "qstat",
        fixture_text("pbs_qstat_x_f_json.sample.json"),
        "qstat: Unknown Job Id 999.pbs-head\n",
        returncode=153,
    )
    jobs = {j.job_id: j for j in PbsClient(runner).qstat(["101.pbs-head", "999.pbs-head"])}
    assert jobs["101.pbs-head"].status.allocation_state == "ASSIGNED"
    assert jobs["102.pbs-head"].status.allocation_state == "RUNNING"
    assert runner.calls == [("qstat", "-x", "-f", "-F", "json", "101.pbs-head", "999.pbs-head")]


def test_qstat_failing_for_another_reason_raises() -> None:
    runner = ReplayRunner()
    runner.reply("qstat", "", "qstat: cannot connect to server pbs-head (errno=111)", 2)
    with pytest.raises(HpcCommandError) as caught:
        PbsClient(runner).qstat(["1.pbs-head"])
    assert caught.value.retryable


def test_qdel_of_finished_or_unknown_jobs_is_fine() -> None:
    pbs = FakePbs(
        jobs={"1.s": PbsJobRow("stalwart-x", "F", 0), "2.s": PbsJobRow("stalwart-y", "R")}
    )
    PbsClient(pbs.runner).cancel(["1.s", "2.s", "3.s"])
    assert pbs.runner.count("qdel") == 1
    assert pbs.jobs["2.s"].exit_status == 271  # SIGTERM + 256: qdel of a running job


def test_five_hundred_jobs_cost_one_qstat_per_poll() -> None:
    pbs = FakePbs(jobs={f"{i}.s": PbsJobRow(f"stalwart-{i}", "R") for i in range(500)})
    clock = Clock()
    tracker = PbsTracker(PbsClient(pbs.runner), min_interval=1.0, clock=clock)
    for i in range(500):
        tracker.track(f"{i}.s", f"a{i}")
    assert len(tracker.poll()) == 500
    assert pbs.runner.count("qstat") == 1
    clock.now += 0.5
    assert tracker.poll() == []  # rate limited: no command
    assert pbs.runner.count("qstat") == 1
    pbs.jobs["7.s"].state, pbs.jobs["7.s"].exit_status = "F", 3
    clock.now += 1.0
    (update,) = tracker.poll()
    assert (update.key, update.status.outcome) == ("a7", Outcome.FAILED)
    assert update.status.reason == "failed: exited with code 3"
    assert pbs.runner.count("qstat") == 2
    assert "7.s" not in tracker.job_ids


def test_a_rerun_counts_as_a_restart_and_a_purged_job_is_lost() -> None:
    pbs = FakePbs(jobs={"1.s": PbsJobRow("stalwart-a", "R", run_count=1)})
    tracker = PbsTracker(PbsClient(pbs.runner), min_interval=0, lost_after=2)
    tracker.track("1.s", "a")
    tracker.track("2.s", "gone")
    assert [(u.key, u.restarts) for u in tracker.poll(force=True)] == [("a", 0)]
    pbs.jobs["1.s"].run_count = 2  # PBS reran it (a node failed, or it was preempted)
    updates = {u.key: u for u in tracker.poll(force=True)}
    assert updates["a"].restarts == 1
    assert updates["gone"].status.outcome is Outcome.NODE_FAILED
    assert "PBS no longer knows this job" in updates["gone"].status.reason


def test_queued_reasons_come_from_the_comment() -> None:
    pbs = FakePbs(
        jobs={
            "1.s": PbsJobRow(
                "stalwart-a", "Q", comment="Not Running: Insufficient amount of resource: ngpus"
            ),
            "2.s": PbsJobRow("stalwart-b", "H"),
        }
    )
    tracker = PbsTracker(PbsClient(pbs.runner))
    tracker.track("1.s", "a")
    tracker.track("2.s", "b")
    updates = {u.key: u for u in tracker.poll()}
    assert updates["a"].status.reason == "queued: Insufficient amount of resource: ngpus"
    assert not updates["a"].status.stuck
    assert updates["b"].status.stuck
