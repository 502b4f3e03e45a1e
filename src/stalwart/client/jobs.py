"""The job queue through the SDK (``Client.list_jobs``, ``Client.update_job``): jobs in the
order the scheduler takes them, and changes to their priority, weight or place (rules:
:mod:`stalwart.master.services.job_queue`)."""

from __future__ import annotations

from typing import Any

from stalwart.client.session import Session
from stalwart.master.api.models.jobs import GetJobsV2Response, LimitedJob

__all__ = ["LimitedJob", "list_jobs", "update_job"]


def list_jobs(session: Session, *, resource_pool: str | None = None) -> list[LimitedJob]:
    """Every job in queue order; each is a ``V1Job`` when the caller may see it in full."""
    params: dict[str, Any] = {"orderBy": "ORDER_BY_ASC"}
    if resource_pool:
        params["resourcePool"] = resource_pool
    found = session.get("/api/v1/job-queues-v2", GetJobsV2Response, params)
    jobs: list[LimitedJob] = []
    for job in found.jobs:
        if job.full is not None:
            jobs.append(job.full)
        elif job.limited is not None:
            jobs.append(job.limited)
    return jobs


def update_job(
    session: Session,
    job_id: str,
    *,
    priority: int | None = None,
    weight: float | None = None,
    ahead_of: str | None = None,
    behind_of: str | None = None,
) -> None:
    update: dict[str, Any] = {"jobId": job_id}
    for key, value in (
        ("priority", priority),
        ("weight", weight),
        ("aheadOf", ahead_of),
        ("behindOf", behind_of),
    ):
        if value is not None:
            update[key] = value
    session.post("/api/v1/job-queues", {"updates": [update]})
