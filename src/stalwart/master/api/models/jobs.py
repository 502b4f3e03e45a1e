"""Wire models of the job queue (``det job list/update``): ``v1Job``, ``v1LimitedJob``,
``v1RBACJob``, ``v1GetJobsV2Response``, ``v1QueueControl``, ``v1UpdateJobQueueRequest``.

REQUIRED keys the official client reads: ``v1Job``: allocatedSlots, entityId, isPreemptible,
jobId, name, requestedSlots, resourcePool, submissionTime, type, username, workspaceId;
``v1LimitedJob``: allocatedSlots, isPreemptible, jobId, requestedSlots, resourcePool, type,
workspaceId; ``v1JobSummary``: jobsAhead, state; the response's ``jobs`` and ``pagination``.
"""

from __future__ import annotations

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "GetJobsV2Response",
    "JobSummary",
    "LimitedJob",
    "QueueControl",
    "RBACJob",
    "UpdateJobQueueRequest",
    "V1Job",
]


class JobSummary(WireModel):
    """``v1JobSummary``."""

    state: str = Field(description="jobv1State: STATE_QUEUED or STATE_SCHEDULED.")
    jobs_ahead: int = Field(description="Jobs ahead of it in its pool's queue.")


class LimitedJob(WireModel):
    """``v1LimitedJob``: a job the caller may not see in full."""

    summary: JobSummary | None = Field(default=None, description="Its place in the queue.")
    type: str = Field(description="jobv1Type.")
    resource_pool: str = Field(description="Its pool.")
    is_preemptible: bool = Field(description="Whether it may be preempted.")
    priority: int | None = Field(default=None, description="Its priority (1 runs first).")
    weight: float | None = Field(default=None, description="Its fair-share weight.")
    job_id: str = Field(description="The job id.")
    requested_slots: int = Field(description="Slots it asks for.")
    allocated_slots: int = Field(description="Slots it holds.")
    progress: float | None = Field(default=None, description="Its progress (0-1).")
    workspace_id: int = Field(description="Its workspace.")


class V1Job(LimitedJob):
    """``v1Job``: a job in full."""

    entity_id: str = Field(description="The experiment id, or the task id.")
    name: str = Field(description="Its name.")
    submission_time: str = Field(description="When it was submitted (RFC 3339).")
    username: str = Field(description="Its owner.")
    user_id: int | None = Field(default=None, description="Its owner's id.")


class RBACJob(WireModel):
    """``v1RBACJob``: exactly one of ``full`` and ``limited``."""

    full: V1Job | None = Field(default=None, description="The job, when the caller may see it.")
    limited: LimitedJob | None = Field(default=None, description="Otherwise, the job in part.")


class GetJobsV2Response(WireModel):
    """``v1GetJobsV2Response``."""

    jobs: list[RBACJob] = Field(default_factory=list, description="The jobs, in queue order.")
    pagination: Pagination = Field(default_factory=Pagination, description="Pagination.")


class QueueControl(WireRequest):
    """``v1QueueControl``: one change to one job."""

    job_id: str = Field(description="The job to change.")
    priority: int | None = Field(default=None, description="A new priority.")
    weight: float | None = Field(default=None, description="A new weight.")
    ahead_of: str | None = Field(default=None, description="Move it ahead of this job.")
    behind_of: str | None = Field(default=None, description="Move it behind this job.")
    resource_pool: str | None = Field(default=None, description="Move it to this pool.")


class UpdateJobQueueRequest(WireRequest):
    """``v1UpdateJobQueueRequest``."""

    updates: list[QueueControl] = Field(default_factory=list, description="The changes.")
