"""The job queue (``det job list`` / ``det job update``): jobs in the order the scheduler
takes them, and changes to their place in it.

A **job** is an experiment (all its trials) or an interactive task (command, notebook, shell,
TensorBoard, generic task) that has at least one allocation waiting for or holding slots. The
queue is read from the very snapshot the scheduling loop reads
(:func:`stalwart.master.rm.agent.placement.read_snapshot`) and ordered by the scheduler's one
definition of it (:func:`stalwart.master.scheduler.queue_order`: smaller priority number
first, then the earlier submission, interactive tasks ahead of experiments of the same
priority): a job's place is that of its first request. So the queued jobs are listed in the
order the scheduler starts them (when each fits the free slots; a job that does not fit holds
its slots and smaller ones behind it may backfill, see ``docs/contributing/scheduler.md``).

Changes (``POST /api/v1/job-queues``), each checked as its job's edit would be (an experiment:
:func:`stalwart.master.policy.require_change_experiment`; a task: its owner or an admin):

- ``priority`` (priority scheduler only): an experiment's goes through
  :func:`stalwart.master.services.experiments.patch_experiment` (as ``det e set priority``);
  a task's into its stored config's ``resources.priority``;
- ``weight`` (fair-share scheduler only): likewise ``resources.weight``;
- ``aheadOf`` / ``behindOf`` another queued job of the same pool (priority scheduler only):
  the job's priority is changed by the least that puts it ahead of (behind) the other one:
  the other's priority when the submission order already does the rest, else one less (more);
  refused when that would leave 1-99;
- ``resourcePool``: refused (moving jobs between pools is not supported).

A change to a job in a pool whose scheduler does not use it is refused (400) with a message
naming the pool's scheduler and what it uses instead. The caller wakes the scheduler.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import ForbiddenError, InvalidArgumentError, NotFoundError
from stalwart.master import policy
from stalwart.master.db.tables import Experiment, Project, Task, User
from stalwart.master.rm.agent.placement import pool_settings, read_snapshot
from stalwart.master.scheduler import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    PoolSettings,
    Request,
    queue_order,
)
from stalwart.master.services import experiments as experiment_service
from stalwart.master.settings import MasterSettings

__all__ = [
    "Job",
    "JobUpdate",
    "describe_jobs",
    "list_jobs",
    "queued_jobs",
    "update_job",
]

_TASK_TYPES = {
    "COMMAND": "TYPE_COMMAND",
    "NOTEBOOK": "TYPE_NOTEBOOK",
    "SHELL": "TYPE_SHELL",
    "TENSORBOARD": "TYPE_TENSORBOARD",
    "GENERIC": "TYPE_GENERIC",
    "CHECKPOINT_GC": "TYPE_CHECKPOINT_GC",
}


@dataclass
class Job:
    """One job of the queue, as its viewer may see it (``full``: name, owner, submission)."""

    job_id: str
    type: str
    resource_pool: str
    position: int
    """Jobs ahead of it in its pool's queue (its ``jobsAhead``)."""
    state: str
    """``STATE_SCHEDULED`` (some of it holds slots) or ``STATE_QUEUED``."""
    priority: int
    weight: float
    order: int
    """Its submission order (the scheduler's second key)."""
    requested_slots: int
    allocated_slots: int
    workspace_id: int
    is_preemptible: bool = True
    full: bool = False
    entity_id: str = ""
    name: str = ""
    submission_time: dt.datetime | None = None
    username: str = ""
    user_id: int | None = None
    progress: float | None = None
    requests: list[Request] = field(default_factory=list)


def _jobs_in_order(snapshot_requests: Sequence[Request]) -> list[tuple[str, list[Request]]]:
    """``(group_id, requests)`` per job, in queue order per pool (pools by name)."""
    jobs: dict[tuple[str, str], list[Request]] = {}
    for request in queue_order(snapshot_requests):
        jobs.setdefault((request.pool, request.group_id), []).append(request)
    return [(group, reqs) for (_, group), reqs in sorted(jobs.items(), key=lambda kv: kv[0][0])]


def _describe(session: Session, user: User, job: Job, group_id: str) -> None:
    """Fill in what the job is, and whether ``user`` may see it in full."""
    if group_id.isdigit():
        experiment = session.get(Experiment, int(group_id))
        if experiment is None:
            return
        project = session.get(Project, experiment.project_id)
        owner = session.get(User, experiment.owner_id)
        job.job_id, job.type, job.entity_id = experiment.job_id, "TYPE_EXPERIMENT", group_id
        job.workspace_id = project.workspace_id if project is not None else 1
        try:
            policy.require_view_experiment(session, user, experiment)
            job.full = True
        except ForbiddenError:
            job.full = False
        job.name = experiment.name
        job.submission_time = experiment.start_time
        job.progress = experiment.progress
    else:
        task = session.get(Task, group_id)
        if task is None:
            return
        owner = session.get(User, task.owner_id) if task.owner_id is not None else None
        job.job_id, job.entity_id = task.task_id, task.task_id
        job.type = _TASK_TYPES.get(task.task_type, "TYPE_GENERIC")
        job.workspace_id = task.workspace_id or 1
        job.full = (
            user.admin
            or task.owner_id == user.id
            or policy.workspace_role(session, user, job.workspace_id) >= policy.Role.VIEWER
        )
        config = task.config or {}
        job.name = str(config.get("description") or task.name or task.task_id)
        job.submission_time = task.start_time
    if owner is not None:
        job.username, job.user_id = owner.username, owner.id


def queued_jobs(
    session: Session, settings: MasterSettings, *, resource_pool: str | None = None
) -> list[Job]:
    """The queue (see the module docstring), pools by name, each in queue order; only
    ``resource_pool``'s when given. Each job has what the snapshot says (place, state, priority,
    weight, slots) but not yet what it is (:func:`describe_jobs`): a caller reading one page of a
    long queue describes that page only."""
    snapshot = read_snapshot(session, settings)
    requests = [r for r in snapshot.requests if resource_pool in (None, "", r.pool)]
    out: list[Job] = []
    ahead: dict[str, int] = {}
    for group_id, reqs in _jobs_in_order(requests):
        first = reqs[0]
        running = [r for r in reqs if r.running]
        job = Job(
            job_id=group_id,
            type="TYPE_EXPERIMENT" if group_id.isdigit() else "TYPE_GENERIC",
            resource_pool=first.pool,
            position=ahead.get(first.pool, 0),
            state="STATE_SCHEDULED" if running else "STATE_QUEUED",
            priority=first.priority,
            weight=first.weight,
            order=first.submitted_order,
            requested_slots=sum(r.slots_needed for r in reqs),
            allocated_slots=sum(r.slots_needed for r in running),
            workspace_id=1,
            is_preemptible=all(r.preemptible for r in reqs),
            requests=reqs,
        )
        ahead[first.pool] = job.position + 1
        out.append(job)
    return out


def describe_jobs(session: Session, user: User, jobs: Sequence[Job]) -> None:
    """Fill in what each job of :func:`queued_jobs` is (its id, type, name, owner, workspace)
    and whether ``user`` may see it in full; jobs ``user`` may not view keep no name, owner or
    submission time (``full=False``)."""
    for job in jobs:
        group_id = job.requests[0].group_id if job.requests else job.job_id
        _describe(session, user, job, group_id)


def list_jobs(
    session: Session,
    settings: MasterSettings,
    user: User,
    *,
    resource_pool: str | None = None,
) -> list[Job]:
    """The whole queue (:func:`queued_jobs`), every job described for ``user``."""
    jobs = queued_jobs(session, settings, resource_pool=resource_pool)
    describe_jobs(session, user, jobs)
    return jobs


@dataclass(frozen=True)
class JobUpdate:
    """One ``v1QueueControl``: the job and what to change (None: unchanged)."""

    job_id: str
    priority: int | None = None
    weight: float | None = None
    ahead_of: str | None = None
    behind_of: str | None = None
    resource_pool: str | None = None


def _find(session: Session, job_id: str) -> Experiment | Task:
    experiment = session.scalar(select(Experiment).where(Experiment.job_id == job_id))
    if experiment is not None:
        return experiment
    task = session.get(Task, job_id)
    if task is not None and task.trial_id is None and task.experiment_id is None:
        return task
    raise NotFoundError(f"job {job_id} not found")


def _pool_of(session: Session, job: Experiment | Task) -> str:
    if isinstance(job, Experiment):
        return job.resource_pool
    from stalwart.master.services.interactive import latest_allocation

    allocation = latest_allocation(session, job.task_id)
    return allocation.resource_pool if allocation is not None else "default"


def _scheduler(settings: MasterSettings, pool: str) -> str:
    return pool_settings(settings).get(pool, PoolSettings()).scheduler


def _set_task_resource(session: Session, task: Task, key: str, value: float) -> None:
    config: dict[str, Any] = json.loads(json.dumps(task.config or {}))
    resources = dict(config.get("resources") or {})
    resources[key] = value
    config["resources"] = resources
    task.config = config
    session.commit()


def _set_priority(session: Session, job: Experiment | Task, priority: int) -> None:
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise InvalidArgumentError(f"priority must be between 1 and 99 (got {priority})")
    if isinstance(job, Experiment):
        experiment_service.patch_experiment(
            session, job.id, experiment_service.ExperimentPatch(priority=priority)
        )
    else:
        _set_task_resource(session, job, "priority", priority)


def _set_weight(session: Session, job: Experiment | Task, weight: float) -> None:
    if not weight > 0:
        raise InvalidArgumentError(f"weight must be greater than 0 (got {weight})")
    if isinstance(job, Experiment):
        experiment_service.patch_experiment(
            session, job.id, experiment_service.ExperimentPatch(weight=weight)
        )
    else:
        _set_task_resource(session, job, "weight", weight)


def _require_change(session: Session, user: User, job: Experiment | Task) -> None:
    if isinstance(job, Experiment):
        policy.require_change_experiment(session, user, job)
    elif not user.admin and job.owner_id != user.id:
        raise ForbiddenError(
            f"user {user.username} cannot change job {job.task_id}: only its owner or an admin can"
        )


def _move(
    session: Session, settings: MasterSettings, user: User, update: JobUpdate, pool: str
) -> int | None:
    """The priority that puts the job ahead of / behind the other one (None: already there)."""
    other_id = update.ahead_of or update.behind_of
    assert other_id is not None
    queue = {j.job_id: j for j in list_jobs(session, settings, user, resource_pool=pool)}
    mine, other = queue.get(update.job_id), queue.get(other_id)
    if mine is None:
        raise InvalidArgumentError(f"job {update.job_id} is not in the queue of pool {pool!r}")
    if other is None:
        raise InvalidArgumentError(
            f"job {other_id} is not in the queue of pool {pool!r} (a job can only move ahead "
            "of or behind a job of its own pool that is waiting or running)"
        )
    if update.ahead_of:
        if (mine.priority, mine.order) < (other.priority, other.order):
            return None
        wanted = other.priority if mine.order < other.order else other.priority - 1
    else:
        if (mine.priority, mine.order) > (other.priority, other.order):
            return None
        wanted = other.priority if mine.order > other.order else other.priority + 1
    if not MIN_PRIORITY <= wanted <= MAX_PRIORITY:
        where = "ahead of" if update.ahead_of else "behind"
        raise InvalidArgumentError(
            f"job {update.job_id} cannot move {where} job {other_id}: that needs priority "
            f"{wanted}, outside 1-99; change job {other_id}'s priority instead"
        )
    return wanted


def update_job(
    session: Session,
    settings: MasterSettings,
    user: User,
    update: JobUpdate,
    *,
    engine_scheduler: str | None = None,
) -> Experiment | Task:
    """Apply one change (see the module docstring); commits; the job changed.

    ``engine_scheduler``: the batch system that orders this master's pools (``SLURM``,
    ``PBS``), which Stalwart's queue changes do not reach (refused).
    """
    job = _find(session, update.job_id)
    _require_change(session, user, job)
    if update.resource_pool:
        raise InvalidArgumentError(
            "moving a job to another resource pool is not supported by Stalwart: kill it and "
            "submit it again with resources.resource_pool set"
        )
    if engine_scheduler:
        raise InvalidArgumentError(
            f"this master's pools are scheduled by {engine_scheduler}, which orders its own "
            "queue: Stalwart's priority, weight and queue moves do not apply"
        )
    pool = _pool_of(session, job)
    scheduler = _scheduler(settings, pool)
    moving = update.ahead_of or update.behind_of
    if update.weight is not None and scheduler != "fair_share":
        raise InvalidArgumentError(
            f"weight applies only to pools with the fair_share scheduler; resource pool {pool!r} "
            "uses the priority scheduler: set the job's priority instead"
        )
    if (update.priority is not None or moving) and scheduler != "priority":
        what = "priority" if update.priority is not None else "moving ahead of or behind a job"
        raise InvalidArgumentError(
            f"{what} applies only to pools with the priority scheduler; resource pool {pool!r} "
            "uses the fair_share scheduler: set the job's weight instead"
        )
    if update.ahead_of and update.behind_of:
        raise InvalidArgumentError("give aheadOf or behindOf, not both")
    if update.priority is not None:
        _set_priority(session, job, update.priority)
    if update.weight is not None:
        _set_weight(session, job, update.weight)
    if moving:
        wanted = _move(session, settings, user, update, pool)
        if wanted is not None:
            _set_priority(session, job, wanted)
    return job
