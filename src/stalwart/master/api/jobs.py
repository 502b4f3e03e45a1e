"""Routes: the job queue (``det job list``, ``det job update``).

- ``GET /api/v1/job-queues-v2``: jobs in the scheduler's order (``resourcePool``, ``states``,
  ``orderBy``, ``offset``/``limit``, ``pagination.total``); jobs the caller may not see come
  ``limited``. Only the jobs of the page asked for are described (read from the database and
  checked against the caller's roles), so a page of a long queue costs a page;
- ``POST /api/v1/job-queues``: change jobs' priority, weight or place (``updates``), each in
  turn; the first refused change stops the rest (the ones before it stay).

What a job is, the order, and the rules of each change:
:mod:`stalwart.master.services.job_queue`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import Empty, paginate, wire_time
from stalwart.master.api.models.jobs import (
    GetJobsV2Response,
    JobSummary,
    LimitedJob,
    RBACJob,
    UpdateJobQueueRequest,
    V1Job,
)
from stalwart.master.db.tables import Experiment
from stalwart.master.rm.base import EnginePools
from stalwart.master.services import job_queue as svc

__all__ = ["job_to_wire", "router"]

router = APIRouter(tags=["jobs"])


def job_to_wire(job: svc.Job) -> RBACJob:
    """A job, in full or limited as its viewer may see it."""
    limited = LimitedJob(
        summary=JobSummary(state=job.state, jobs_ahead=job.position),
        type=job.type,
        resource_pool=job.resource_pool,
        is_preemptible=job.is_preemptible,
        priority=job.priority,
        weight=job.weight,
        job_id=job.job_id,
        requested_slots=job.requested_slots,
        allocated_slots=job.allocated_slots,
        progress=job.progress if job.full else None,
        workspace_id=job.workspace_id,
    )
    if not job.full:
        return RBACJob(limited=limited)
    return RBACJob(
        full=V1Job(
            **limited.model_dump(),
            entity_id=job.entity_id,
            name=job.name,
            submission_time=wire_time(job.submission_time) or "",
            username=job.username,
            user_id=job.user_id,
        )
    )


@router.get("/job-queues-v2", response_model=GetJobsV2Response, response_model_exclude_none=True)
def get_jobs_v2(
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    resource_pool: Annotated[str | None, Query(alias="resourcePool")] = None,
    states: Annotated[list[str] | None, Query()] = None,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
    offset: int = 0,
    limit: int = 0,
) -> GetJobsV2Response:
    """The job queue: each pool's jobs in the order its scheduler takes them (a page of it with
    ``offset``/``limit``; ``pagination.total`` counts every job that matches)."""
    jobs = svc.queued_jobs(session, state.settings, resource_pool=resource_pool)
    if states:
        jobs = [j for j in jobs if j.state in states]
    if order_by == "ORDER_BY_DESC":
        jobs.reverse()
    start, end, pagination = paginate(len(jobs), offset, limit)
    page = jobs[start:end]
    svc.describe_jobs(session, caller.user, page)
    return GetJobsV2Response(jobs=[job_to_wire(j) for j in page], pagination=pagination)


@router.post("/job-queues", response_model=Empty)
def update_job_queue(
    body: UpdateJobQueueRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """Change jobs' priority, weight or place in the queue; the scheduler then decides again."""
    engine = state.rm.scheduler_type if isinstance(state.rm, EnginePools) else None
    try:
        for update in body.updates:
            job = svc.update_job(
                session,
                state.settings,
                caller.user,
                svc.JobUpdate(
                    job_id=update.job_id,
                    priority=update.priority,
                    weight=update.weight,
                    ahead_of=update.ahead_of or None,
                    behind_of=update.behind_of or None,
                    resource_pool=update.resource_pool or None,
                ),
                engine_scheduler=engine,
            )
            if isinstance(job, Experiment):
                state.hints.experiment(job.id)
    finally:
        state.hints.poke()
    return Empty()
