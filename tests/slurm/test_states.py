"""Slurm job states -> allocation states, reasons and outcomes."""

from __future__ import annotations

import pytest

from stalwart.hpc.states import Outcome, parse_exit_code, pending_reason, slurm_job_status


@pytest.mark.parametrize(
    ("state", "reason", "exit_code", "alloc", "outcome", "text"),
    [
        ("PENDING", "Resources", "", "ASSIGNED", None, "queued: waiting for resources"),
        ("PENDING", "Priority", "", "ASSIGNED", None, "queued: waiting for jobs with a higher"),
        ("PD", "None", "", "ASSIGNED", None, "queued: waiting to be scheduled"),
        ("CONFIGURING", "None", "", "STARTING", None, "its nodes are being configured"),
        ("RUNNING", "None", "", "RUNNING", None, "running"),
        ("COMPLETING", "None", "", "TERMINATING", None, "finishing"),
        ("COMPLETED", "None", "0:0", "TERMINATED", Outcome.SUCCEEDED, "completed"),
        ("FAILED", "NonZeroExitCode", "3:0", "TERMINATED", Outcome.FAILED, "failed: exited with"),
        ("FAILED", "", "0:9", "TERMINATED", Outcome.FAILED, "failed: killed by signal 9"),
        ("FAILED", "JobLaunchFailure", "1:0", "TERMINATED", Outcome.FAILED, "failed: its launch"),
        ("CANCELLED", "None", "0:0", "TERMINATED", Outcome.CANCELED, "cancelled"),
        ("CANCELLED by 1000", "", "0:15", "TERMINATED", Outcome.CANCELED, "cancelled"),
        ("TIMEOUT", "TimeLimit", "0:0", "TERMINATED", Outcome.TIMED_OUT, "reached its time limit"),
        ("DEADLINE", "", "", "TERMINATED", Outcome.TIMED_OUT, "reached its deadline"),
        ("PREEMPTED", "", "0:0", "TERMINATED", Outcome.PREEMPTED, "preempted"),
        ("NODE_FAIL", "NodeDown", "0:0", "TERMINATED", Outcome.NODE_FAILED, "a node failed"),
        ("BOOT_FAIL", "", "", "TERMINATED", Outcome.NODE_FAILED, "a node failed to boot"),
        ("OUT_OF_MEMORY", "", "0:125", "TERMINATED", Outcome.OUT_OF_MEMORY, "ran out of memory"),
        ("REQUEUED", "", "", "ASSIGNED", None, "queued: requeued"),
        ("REQUEUE_HOLD", "", "", "ASSIGNED", None, "queued: requeued and held"),
    ],
)
def test_slurm_states_map_to_allocation_states_with_reasons(
    state: str, reason: str, exit_code: str, alloc: str, outcome: Outcome | None, text: str
) -> None:
    status = slurm_job_status(state, reason, exit_code)
    assert status.allocation_state == alloc
    assert status.outcome == outcome
    assert status.reason.startswith(text), status.reason
    assert status.terminal == (alloc == "TERMINATED")


def test_failed_job_keeps_its_exit_code_and_signal() -> None:
    status = slurm_job_status("FAILED", "NonZeroExitCode", "3:0")
    assert (status.exit_code, status.signal, status.reason) == (
        3,
        None,
        "failed: exited with code 3",
    )
    assert not status.infrastructure


def test_preemption_and_node_failure_are_not_the_tasks_fault() -> None:
    assert slurm_job_status("PREEMPTED").infrastructure
    assert slurm_job_status("NODE_FAIL").infrastructure
    assert not slurm_job_status("TIMEOUT").infrastructure


@pytest.mark.parametrize(
    ("code", "stuck"),
    [
        ("Resources", False),
        ("Priority", False),
        ("DependencyNeverSatisfied", True),
        ("JobHeldUser", True),
        ("PartitionConfig", True),
        ("PartitionTimeLimit", True),
        ("PartitionNodeLimit", True),
        ("BadConstraints", True),
        ("ReqNodeNotAvail", True),
        ("ReqNodeNotAvail, UnavailableNodes:n1", True),
        ("QOSMaxJobsPerUserLimit", False),
        ("AssocGrpGRES", False),
    ],
)
def test_pending_reasons_say_whether_the_job_can_ever_start(code: str, stuck: bool) -> None:
    text, is_stuck = pending_reason(code)
    assert is_stuck is stuck
    assert text
    assert slurm_job_status("PENDING", code).stuck is stuck


def test_unknown_reason_and_state_are_shown_as_is() -> None:
    assert pending_reason("SomethingNew") == ("waiting (SomethingNew)", False)
    status = slurm_job_status("FUTURE_STATE")
    assert status.allocation_state is None
    assert "FUTURE_STATE" in status.reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:0", (0, None)),
        ("3:0", (3, None)),
        ("0:15", (0, 15)),
        ("", (None, None)),
        ("7", (7, None)),
    ],
)
def test_parse_exit_code(text: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_exit_code(text) == expected
