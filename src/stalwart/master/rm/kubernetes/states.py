"""Job and pod statuses as allocation states (pure functions).

:func:`allocation_status` reads an allocation's Job and pods (as the API returns them) and says
where the allocation stands, all-or-nothing over its pods (a gang):

- **EXITED** when any pod's image cannot be pulled for good (``ImagePullBackOff``,
  ``InvalidImageName``, ``ErrImageNeverPull``: ``image_failure`` is set, with the registry's
  message; ``ErrImagePull`` alone may be transient and waits), when any pod failed (its task's
  exit code; the other pods are killed by the caller), when every pod succeeded (0), or when the
  Job failed without a pod to tell why (its condition's message);
- **RUNNING** once every pod runs (or already succeeded);
- **PULLING** while some pod is on a node but not yet running (the image is being pulled, or the
  containers are being created);
- **ASSIGNED** while pods wait for a node (``waiting``: the scheduler's reason, e.g.
  ``Unschedulable``, for the trial's logs).

:func:`pull_seconds` is the time between a pod being scheduled and its task container starting
(the image pull, mostly), the longest over the pods.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "FATAL_PULL_REASONS",
    "AllocationStatus",
    "PodView",
    "allocation_status",
    "pod_address",
    "pod_rank",
    "pod_view",
    "pull_seconds",
]

FATAL_PULL_REASONS = frozenset({"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
_RANK_LABEL = "batch.kubernetes.io/job-completion-index"

State = Literal["ASSIGNED", "PULLING", "RUNNING", "EXITED"]


@dataclass(frozen=True)
class PodView:
    """What matters of one pod."""

    name: str
    rank: int
    phase: str
    scheduled: bool
    waiting_reason: str | None = None
    waiting_message: str | None = None
    exit_code: int | None = None
    terminated_reason: str | None = None
    terminated_message: str | None = None
    unschedulable: str | None = None
    scheduled_at: dt.datetime | None = None
    started_at: dt.datetime | None = None


@dataclass(frozen=True)
class AllocationStatus:
    """Where an allocation stands (see the module docstring)."""

    state: State
    exit_code: int | None = None
    reason: str | None = None
    image_failure: bool = False
    waiting: str | None = None
    failed_rank: int | None = None


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def pod_rank(pod: Mapping[str, Any]) -> int:
    """The pod's rank: its Job completion index (label, or annotation), else 0."""
    meta = pod.get("metadata") or {}
    for source in (meta.get("labels") or {}, meta.get("annotations") or {}):
        value = source.get(_RANK_LABEL)
        if value is not None and str(value).isdigit():
            return int(value)
    return 0


def pod_address(pod: Mapping[str, Any]) -> str | None:
    """The pod's IP (``status.podIP``) while it runs (phase Running); None otherwise: its
    service can answer only then."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or not status.get("podIP"):
        return None
    return str(status["podIP"])


def pod_view(pod: Mapping[str, Any], container: str) -> PodView:
    """The :class:`PodView` of a pod whose task container is named ``container``."""
    status = pod.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    sched = conditions.get("PodScheduled") or {}
    phase = str(status.get("phase") or "Pending")
    scheduled = (
        sched.get("status") == "True"
        or bool((pod.get("spec") or {}).get("nodeName"))
        or phase != "Pending"
    )
    unschedulable = None
    if sched.get("status") == "False":
        unschedulable = f"{sched.get('reason') or 'Unschedulable'}: {sched.get('message') or ''}"
    statuses = list(status.get("initContainerStatuses") or []) + list(
        status.get("containerStatuses") or []
    )
    waiting_reason = waiting_message = None
    exit_code = terminated_reason = terminated_message = None
    started_at = None
    for entry in statuses:
        state = entry.get("state") or {}
        waiting = state.get("waiting")
        if waiting and waiting_reason not in FATAL_PULL_REASONS:
            waiting_reason = waiting.get("reason")
            waiting_message = waiting.get("message")
        if entry.get("name") != container:
            continue
        if "running" in state:
            started_at = _time(state["running"].get("startedAt"))
        terminated = state.get("terminated")
        if terminated:
            exit_code = int(terminated.get("exitCode", 0))
            terminated_reason = terminated.get("reason")
            terminated_message = terminated.get("message")
            started_at = _time(terminated.get("startedAt"))
    return PodView(
        name=str((pod.get("metadata") or {}).get("name") or ""),
        rank=pod_rank(pod),
        phase=phase,
        scheduled=scheduled,
        waiting_reason=waiting_reason,
        waiting_message=waiting_message,
        exit_code=exit_code,
        terminated_reason=terminated_reason,
        terminated_message=terminated_message,
        unschedulable=unschedulable,
        scheduled_at=_time(sched.get("lastTransitionTime")) if scheduled else None,
        started_at=started_at,
    )


def _job_failure(job: Mapping[str, Any] | None) -> str | None:
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return f"{condition.get('reason') or 'Failed'}: {condition.get('message') or ''}"
    return None


def allocation_status(
    job: Mapping[str, Any] | None, pods: Iterable[PodView], expected: int
) -> AllocationStatus:
    """Where the allocation of ``job`` and its ``pods`` stands (see the module docstring);
    ``expected``: its number of pods."""
    views = sorted(pods, key=lambda p: p.rank)
    for pod in views:
        if pod.waiting_reason in FATAL_PULL_REASONS:
            message = pod.waiting_message or pod.waiting_reason
            return AllocationStatus(
                "EXITED",
                reason=f"the image of pod {pod.name} cannot be pulled "
                f"({pod.waiting_reason}): {message}",
                image_failure=True,
                failed_rank=pod.rank,
            )
    for pod in views:
        if pod.phase == "Failed":
            code = pod.exit_code if pod.exit_code is not None else None
            detail = pod.terminated_reason or "Failed"
            if pod.terminated_message:
                detail += f": {pod.terminated_message.strip()}"
            return AllocationStatus(
                "EXITED",
                exit_code=code,
                reason=f"pod {pod.name} failed ({detail}, exit code {code})",
                failed_rank=pod.rank,
            )
    ranks = {p.rank: p for p in views}
    if len(ranks) >= expected and all(p.phase == "Succeeded" for p in ranks.values()):
        return AllocationStatus("EXITED", exit_code=0, reason="every pod succeeded")
    failure = _job_failure(job)
    if failure is not None:
        return AllocationStatus("EXITED", reason=f"the Job failed: {failure}")
    if len(ranks) >= expected and all(p.phase in ("Running", "Succeeded") for p in ranks.values()):
        return AllocationStatus("RUNNING")
    if any(p.scheduled for p in views):
        return AllocationStatus("PULLING")
    waiting = next((p.unschedulable for p in views if p.unschedulable), None)
    return AllocationStatus("ASSIGNED", waiting=waiting)


def pull_seconds(pods: Iterable[PodView]) -> float | None:
    """Seconds from scheduling to the task container's start, the longest over the pods that
    started (None when none did, or the times are missing)."""
    spans = [
        (p.started_at - p.scheduled_at).total_seconds()
        for p in pods
        if p.started_at is not None and p.scheduled_at is not None
    ]
    return max(spans) if spans else None
