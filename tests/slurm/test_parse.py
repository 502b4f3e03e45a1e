"""Parsers against outputs captured from a real Slurm 22.05 (tests/slurm/fixtures)."""

from __future__ import annotations

import pytest

from stalwart.hpc.slurm.client import parse_accounting
from stalwart.hpc.slurm.parse import (
    SlurmParseError,
    SqueueRecord,
    parse_gres,
    parse_sacct,
    parse_sbatch,
    parse_scontrol,
    parse_sinfo,
    parse_squeue,
)
from stalwart.hpc.states import Outcome
from tests.slurm.conftest import FIXTURES, fixture_text


def by_role(name: str, jobs: dict[str, str]) -> dict[str, SqueueRecord]:
    rows = {row.job_id: row for row in parse_squeue(fixture_text(name))}
    return {role: rows[job_id] for role, job_id in jobs.items() if job_id in rows}


def test_sbatch_job_ids() -> None:
    assert parse_sbatch(fixture_text("sbatch_ok.stdout")).isdigit()
    assert parse_sbatch(fixture_text("sbatch_plain.stdout")).isdigit()
    assert parse_sbatch("42;cluster\n") == "42"
    with pytest.raises(SlurmParseError):
        parse_sbatch(fixture_text("sbatch_bad_partition.stdout"))


def test_squeue_with_running_pending_and_finished_jobs(captured_jobs: dict[str, str]) -> None:
    rows = by_role("squeue_mixed.stdout", captured_jobs)
    states = {role: (row.state, row.status.allocation_state) for role, row in rows.items()}
    assert states["completed"] == ("COMPLETED", "TERMINATED")
    assert states["failed"] == ("FAILED", "TERMINATED")
    assert states["running"] == ("RUNNING", "RUNNING")
    assert states["timeout"] == ("RUNNING", "RUNNING")
    for role in ("pending", "held", "dependency"):
        assert states[role] == ("PENDING", "ASSIGNED")
    assert rows["held"].reason == "JobHeldUser"
    assert rows["held"].status.stuck
    assert rows["dependency"].status.reason == "queued: waiting for a dependency"
    assert rows["failed"].reason == "NonZeroExitCode"
    assert rows["timeout"].time_limit == "1:00"
    assert rows["running"].name == "stalwart-running"
    assert rows["running"].node_list
    assert rows["pending"].node_list == ""
    assert rows["pending"].start_time == ""


def test_squeue_after_cancel_and_timeout(captured_jobs: dict[str, str]) -> None:
    rows = by_role("squeue_after_cancel.stdout", captured_jobs)
    assert rows["running"].status.outcome is Outcome.CANCELED
    assert rows["dependency"].reason == "DependencyNeverSatisfied"
    assert rows["dependency"].status.stuck
    rows = by_role("squeue_after_timeout.stdout", captured_jobs)
    assert rows["timeout"].status.outcome is Outcome.TIMED_OUT
    assert rows["timeout"].reason == "TimeLimit"
    too_big = rows["too_many_nodes"]
    assert (too_big.state, too_big.reason, too_big.nodes) == ("PENDING", "PartitionConfig", 5)
    assert too_big.status.stuck


def test_preempted_job_is_requeued_with_a_restart(captured_jobs: dict[str, str]) -> None:
    snapshots = sorted(FIXTURES.glob("squeue_preempt_*.stdout"))
    requeued = [
        row
        for path in snapshots
        for row in parse_squeue(path.read_text())
        if row.job_id == captured_jobs["preempted"] and row.restarts == 1
    ]
    assert requeued, "no snapshot shows the requeued job"
    assert requeued[0].status.allocation_state == "ASSIGNED"
    rows = by_role("squeue_requeued_running.stdout", captured_jobs)
    assert (rows["preempted"].state, rows["preempted"].restarts) == ("RUNNING", 1)


def test_node_failure(captured_jobs: dict[str, str]) -> None:
    row = by_role("squeue_node_fail.stdout", captured_jobs)["node_fail"]
    assert row.status.outcome is Outcome.NODE_FAILED
    assert row.reason == "NodeDown"


def test_sacct_completion_records(captured_jobs: dict[str, str]) -> None:
    records = parse_sacct(fixture_text("sacct_completion.stdout"))
    last = {r.job_id: r for r in records}  # later records of a requeued job win
    expected = {
        "completed": Outcome.SUCCEEDED,
        "failed": Outcome.FAILED,
        "running": Outcome.CANCELED,
        "timeout": Outcome.TIMED_OUT,
        "node_fail": Outcome.NODE_FAILED,
        "preempted": Outcome.CANCELED,
        "held": Outcome.CANCELED,
    }
    for role, outcome in expected.items():
        assert last[captured_jobs[role]].status.outcome is outcome, role
    failed = last[captured_jobs["failed"]]
    assert (failed.exit_code, failed.status.exit_code) == ("3:0", 3)
    runs = [r.state for r in records if r.job_id == captured_jobs["preempted"]]
    assert runs[0] == "PREEMPTED"
    held = last[captured_jobs["held"]]
    assert (held.nodes, held.node_list) == (0, "")


def test_sacct_without_slurmdbd_fails_and_config_says_jobcomp() -> None:
    assert "accounting storage is disabled" in fixture_text("sacct_no_dbd.stderr")
    assert parse_accounting(fixture_text("scontrol_show_config.stdout")) == "jobcomp"
    assert parse_accounting("AccountingStorageType = accounting_storage/slurmdbd\n") == "slurmdbd"
    assert parse_accounting("JobCompType = jobcomp/none\n") == "none"


def test_sinfo_nodes_with_gres() -> None:
    nodes = parse_sinfo(fixture_text("sinfo_idle.stdout"))
    assert [n.partition for n in nodes] == ["debug", "urgent"]
    debug = nodes[0]
    assert debug.default
    assert not nodes[1].default
    assert debug.cpus >= 1
    assert debug.memory_mb > 0
    assert (debug.gpus, debug.gpu_types) == (2, ("fake",))
    assert debug.usable
    assert debug.cpus_idle == debug.cpus
    busy = parse_sinfo(fixture_text("sinfo_busy.stdout"))[0]
    assert busy.usable
    assert busy.cpus_alloc > 0
    drained = parse_sinfo(fixture_text("sinfo_drained.stdout"))[0]
    assert not drained.usable


@pytest.mark.parametrize(
    ("gres", "parsed"),
    [
        ("(null)", {}),
        ("gpu:2", {"gpu": {"": 2}}),
        ("gpu:fake:2", {"gpu": {"fake": 2}}),
        ("gpu:a100:4(S:0-1),gpu:v100:2,nic:1", {"gpu": {"a100": 4, "v100": 2}, "nic": {"": 1}}),
        ("gpu:mi250:8(S:0,1)", {"gpu": {"mi250": 8}}),
        ("gpu", {"gpu": {"": 1}}),
    ],
)
def test_parse_gres(gres: str, parsed: dict[str, dict[str, int]]) -> None:
    assert parse_gres(gres) == parsed


def test_scontrol_show_job(captured_jobs: dict[str, str]) -> None:
    jobs = {
        job["JobId"]: job for job in parse_scontrol(fixture_text("scontrol_show_job_all.stdout"))
    }
    pending = jobs[captured_jobs["pending"]]
    assert pending["JobState"] == "PENDING"
    assert pending["JobName"] == "stalwart-pending"
    assert pending["Requeue"] == "1"
    assert jobs[captured_jobs["held"]]["Reason"] == "JobHeldUser"
    requeued = parse_scontrol(fixture_text("scontrol_show_job_requeued.stdout"))[0]
    assert requeued["Restarts"] == "1"
    assert "Invalid job id" in fixture_text("scontrol_show_job_unknown.stderr")


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parse_squeue, "1|RUNNING|None\n"),
        (parse_squeue, "x|RUNNING|None|zero|debug|1|vm|a|b|c|name\n"),
        (parse_sacct, "1|COMPLETED\n"),
        (parse_sinfo, "vm|debug\n"),
        (parse_scontrol, "Name=x\n"),
    ],
)
def test_malformed_output_names_the_line(parser: object, text: str) -> None:
    with pytest.raises(SlurmParseError):
        parser(text)  # type: ignore[operator]
