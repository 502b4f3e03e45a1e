"""Batch-job states (Slurm, PBS) mapped to Stalwart allocation states, with readable reasons.

Contract: pure functions. :func:`slurm_job_status` takes what ``squeue``/``sacct`` print (the
state word, the reason code, the ``exit:signal`` pair) and returns a :class:`JobStatus`:

- ``allocation_state``: the allocation state it implies (``ASSIGNED`` while queued, the API
  shows QUEUED; ``STARTING``; ``RUNNING``; ``TERMINATING``; ``TERMINATED``), or None for a state
  this code does not know (the caller keeps what it had);
- ``outcome``: None while the job lives, else how it ended (:class:`Outcome`);
- ``reason``: one sentence a user can read ("waiting for resources", "exited with code 3",
  "reached its time limit");
- ``stuck``: a queued job that will never start without someone acting (bad partition limits,
  a held job, an impossible dependency), so the master can surface or cancel it;
- ``infrastructure``: the end was not the task's fault (node failure, preemption).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

__all__ = [
    "AllocationState",
    "JobStatus",
    "Outcome",
    "parse_exit_code",
    "pending_reason",
    "slurm_job_status",
]

AllocationState = Literal["ASSIGNED", "STARTING", "RUNNING", "TERMINATING", "TERMINATED"]


class Outcome(StrEnum):
    """How a batch job ended."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TIMED_OUT = "TIMED_OUT"
    PREEMPTED = "PREEMPTED"
    NODE_FAILED = "NODE_FAILED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"


@dataclass(frozen=True)
class JobStatus:
    """A batch job's state in Stalwart's words (see the module docstring)."""

    native_state: str
    allocation_state: AllocationState | None
    reason: str
    outcome: Outcome | None = None
    exit_code: int | None = None
    signal: int | None = None
    stuck: bool = False
    infrastructure: bool = False

    @property
    def terminal(self) -> bool:
        """True once the job has ended (``allocation_state == "TERMINATED"``)."""
        return self.allocation_state == "TERMINATED"


# Slurm pending reasons (squeue %r, "JOB REASON CODES" in squeue(1)) -> (text, stuck).
_PENDING_REASONS: dict[str, tuple[str, bool]] = {
    "None": ("waiting to be scheduled", False),
    "Priority": ("waiting for jobs with a higher priority", False),
    "Resources": ("waiting for resources", False),
    "Dependency": ("waiting for a dependency", False),
    "DependencyNeverSatisfied": ("its dependency can never be satisfied", True),
    "BeginTime": ("waiting for its start time (or requeued)", False),
    "JobHeldUser": ("held by its user (release it with scontrol release)", True),
    "JobHeldAdmin": ("held by an administrator", True),
    "launch failed requeued held": ("its launch failed; requeued and held", True),
    "PartitionDown": ("the partition is down", False),
    "PartitionInactive": ("the partition is inactive", False),
    "PartitionNodeLimit": ("it needs more nodes than the partition allows", True),
    "PartitionTimeLimit": ("its time limit exceeds the partition's", True),
    "PartitionConfig": ("the partition's configuration forbids the request", True),
    "BadConstraints": ("no node can satisfy its constraints", True),
    "InvalidAccount": ("its account is invalid", True),
    "InvalidQOS": ("its QOS is invalid", True),
    "ReqNodeNotAvail": ("a required node is not available (down, drained or reserved)", True),
    "NodeDown": ("a node it needs is down", False),
    "Reservation": ("waiting for its reservation", False),
    "Licenses": ("waiting for licenses", False),
    "Cleaning": ("requeued; waiting for the previous run to clean up", False),
    "Prolog": ("its prolog is running", False),
    "FrontEndDown": ("no front-end node is available", False),
}


def pending_reason(code: str) -> tuple[str, bool]:
    """A queued job's Slurm reason code as ``(text, stuck)``; unknown codes are shown as is.

    Limits of an association or QOS (``AssocGrpGRES``, ``QOSMaxJobsPerUserLimit``...) wait for
    usage to drop, so they are not stuck. A required node that is not available
    (``ReqNodeNotAvail``) is stuck: it waits for an administrator to bring the node back, which
    the caller's time limit on stuck jobs decides whether to wait for. Details after a comma
    (``ReqNodeNotAvail, UnavailableNodes:n1``) are ignored.
    """
    code = code.strip()
    # "ReqNodeNotAvail, UnavailableNodes:n1" and the like: the code, then details.
    code = code.split(",", 1)[0].strip() if "," in code else code
    if code in _PENDING_REASONS:
        return _PENDING_REASONS[code]
    if code.startswith(("Assoc", "QOS", "MaxJobs", "MaxCpu", "MaxGRES", "MaxNode")):
        return f"waiting for a limit of its account or QOS ({code})", False
    if not code or code == "(null)":
        return "waiting to be scheduled", False
    return f"waiting ({code})", False


_EXIT = re.compile(r"^\s*(-?\d+)(?::(\d+))?\s*$")


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """Slurm's ``ExitCode`` ``"status:signal"`` as ``(status, signal)``; None for blanks.

    ``"0:0"`` -> ``(0, None)``; ``"3:0"`` -> ``(3, None)``; ``"0:15"`` -> ``(0, 15)``.
    """
    match = _EXIT.match(text or "")
    if not match:
        return None, None
    status = int(match.group(1))
    signal = int(match.group(2)) if match.group(2) else 0
    return status, (signal or None)


_LIVE: dict[str, tuple[AllocationState, str]] = {
    "CONFIGURING": ("STARTING", "its nodes are being configured"),
    "RUNNING": ("RUNNING", "running"),
    "SUSPENDED": ("RUNNING", "suspended by Slurm"),
    "STOPPED": ("RUNNING", "stopped by Slurm (SIGSTOP)"),
    "SIGNALING": ("RUNNING", "being signalled"),
    "RESIZING": ("RUNNING", "being resized"),
    "STAGE_OUT": ("TERMINATING", "staging out"),
    "COMPLETING": ("TERMINATING", "finishing (its processes are exiting)"),
}

_QUEUED = {
    "PENDING": "",
    "REQUEUED": "requeued",
    "REQUEUE_FED": "requeued",
    "REQUEUE_HOLD": "requeued and held (release it with scontrol release)",
    "RESV_DEL_HOLD": "held: its reservation was deleted",
}


def _ended(status: int | None, signal: int | None) -> str:
    if signal:
        return f"killed by signal {signal}"
    if status:
        return f"exited with code {status}"
    return "exited with code 0"


def slurm_job_status(state: str, reason: str = "", exit_code: str = "") -> JobStatus:
    """Map one Slurm job (``state`` word, ``reason`` code, ``exit_code`` ``"N:S"``) to a status.

    ``state`` is squeue's ``%T`` or sacct's ``State`` (``"CANCELLED by 1000"`` and a trailing
    ``+`` are accepted). Short codes (``PD``, ``R``, ``CD``...) are accepted too.
    """
    word = state.strip().split(" ", 1)[0].rstrip("+").upper()
    word = _SHORT.get(word, word)
    native = word
    reason = reason.strip()
    status, signal = parse_exit_code(exit_code)

    if word in _QUEUED:
        text, stuck = pending_reason(reason)
        prefix = _QUEUED[word]
        if prefix:
            stuck = stuck or word in ("REQUEUE_HOLD", "RESV_DEL_HOLD")
            text = prefix if reason in ("", "None", "BeginTime") else f"{prefix}; {text}"
        return JobStatus(native, "ASSIGNED", f"queued: {text}", stuck=stuck)
    if word in _LIVE:
        alloc_state, text = _LIVE[word]
        return JobStatus(native, alloc_state, text)

    def end(outcome: Outcome, text: str, *, infra: bool = False) -> JobStatus:
        return JobStatus(
            native,
            "TERMINATED",
            text,
            outcome=outcome,
            exit_code=status,
            signal=signal,
            infrastructure=infra,
        )

    if word == "COMPLETED":
        return end(Outcome.SUCCEEDED, "completed")
    if word == "FAILED":
        why = "its launch failed" if reason == "JobLaunchFailure" else _ended(status, signal)
        return end(Outcome.FAILED, f"failed: {why}")
    if word in ("CANCELLED", "REVOKED"):
        return end(Outcome.CANCELED, "cancelled (scancel or an administrator)")
    if word in ("TIMEOUT", "DEADLINE"):
        what = "time limit" if word == "TIMEOUT" else "deadline"
        return end(Outcome.TIMED_OUT, f"reached its {what} and was killed")
    if word == "PREEMPTED":
        return end(Outcome.PREEMPTED, "preempted by a higher-priority job", infra=True)
    if word in ("NODE_FAIL", "BOOT_FAIL"):
        what = "a node failed" if word == "NODE_FAIL" else "a node failed to boot"
        return end(Outcome.NODE_FAILED, f"{what} while it ran", infra=True)
    if word == "OUT_OF_MEMORY":
        return end(Outcome.OUT_OF_MEMORY, "ran out of memory (killed by the OOM killer)")
    if word == "SPECIAL_EXIT":
        why = _ended(status, signal)
        return end(Outcome.FAILED, f"failed and held for an administrator: {why}")
    return JobStatus(native, None, f"unknown Slurm state {state.strip()!r}")


_SHORT = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CF": "CONFIGURING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "F": "FAILED",
    "CA": "CANCELLED",
    "TO": "TIMEOUT",
    "PR": "PREEMPTED",
    "NF": "NODE_FAIL",
    "BF": "BOOT_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "DL": "DEADLINE",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "RF": "REQUEUE_FED",
    "RS": "RESIZING",
    "RV": "REVOKED",
    "SE": "SPECIAL_EXIT",
    "SI": "SIGNALING",
    "SO": "STAGE_OUT",
    "ST": "STOPPED",
    "S": "SUSPENDED",
}
