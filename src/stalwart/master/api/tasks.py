"""Routes: tasks (``det slot list``, ``det task list``; the task's context directory, 5.4)."""

from __future__ import annotations

import base64
from typing import Any

from fastapi import APIRouter
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import NotFoundError
from stalwart.master import policy
from stalwart.master.api.deps import Caller, CallerDep, SessionDep
from stalwart.master.api.models.agents import (
    AcceleratorData,
    AllocationSummary,
    GetTaskAcceleratorDataResponse,
    GetTaskContextDirectoryResponse,
    GetTaskResponse,
    GetTasksResponse,
)
from stalwart.master.api.wire.agents import allocation_summary, task_to_wire
from stalwart.master.db.tables import Allocation, Experiment, Slot, Task
from stalwart.master.services import allocations as alloc_service
from stalwart.master.services import interactive

__all__ = ["live_summaries", "router"]

router = APIRouter(tags=["tasks"])

DEFAULT_PRIORITY = 42


def _priority(session: Session, task: Task | None, cache: dict[int, int | None]) -> int | None:
    if task is not None and task.experiment_id is None and task.config is not None:
        priority = interactive.task_config(task).resources.priority
        return priority if priority is not None else DEFAULT_PRIORITY
    if task is None or task.experiment_id is None:
        return DEFAULT_PRIORITY
    if task.experiment_id not in cache:
        exp = session.get(Experiment, task.experiment_id)
        resources: Any = (exp.config or {}).get("resources") if exp is not None else None
        value = resources.get("priority") if isinstance(resources, dict) else None
        cache[task.experiment_id] = value if isinstance(value, int) else DEFAULT_PRIORITY
    return cache[task.experiment_id]


def _hidden_tasks(session: Session, caller: Caller) -> set[str]:
    """Tasks of experiments, and live interactive tasks, in workspaces the caller may not see
    (usually none)."""
    out = {
        task.task_id
        for task in session.scalars(
            select(Task)
            .join(Allocation, Allocation.task_id == Task.task_id)
            .where(Task.workspace_id.is_not(None), Allocation.state != "TERMINATED")
        )
        if not interactive.can_view(session, caller.user, task)
    }
    hidden = policy.hidden_project_ids(session, caller.user)
    if not hidden:
        return out
    query = (
        select(Task.task_id)
        .join(Experiment, Experiment.id == Task.experiment_id)
        .where(Experiment.project_id.in_(hidden))
    )
    return out | set(session.scalars(query))


@router.get("/tasks", response_model=GetTasksResponse)
def get_tasks(caller: CallerDep, session: SessionDep) -> GetTasksResponse:
    """Every live (not yet terminated) allocation the caller may see, by allocation id (those
    of experiments in workspaces where the caller's role is ``none`` are left out)."""
    return GetTasksResponse(allocation_id_to_summary=live_summaries(session, caller))


def live_summaries(session: Session, caller: Caller) -> dict[str, AllocationSummary]:
    """The summaries of ``GET /api/v1/tasks`` (and the legacy ``GET /tasks``), by allocation."""
    hidden = _hidden_tasks(session, caller)
    live = [
        allocation
        for allocation in session.scalars(
            select(Allocation).where(Allocation.state != "TERMINATED").order_by(Allocation.id)
        )
        if allocation.task_id not in hidden
    ]
    held: dict[str, list[Slot]] = {}
    if live:
        rows = session.scalars(
            select(Slot)
            .where(Slot.allocation_id.in_([a.id for a in live]))
            .order_by(Slot.agent_id, Slot.device_index)
        )
        for slot in rows:
            held.setdefault(slot.allocation_id or "", []).append(slot)
    cache: dict[int, int | None] = {}
    summaries = {}
    for allocation in live:
        task = session.get(Task, allocation.task_id)
        summaries[allocation.id] = allocation_summary(
            allocation, task, held.get(allocation.id, []), _priority(session, task, cache)
        )
    return summaries


@router.get("/tasks/{task_id}", response_model=GetTaskResponse)
def get_task(task_id: str, _caller: CallerDep, session: SessionDep) -> GetTaskResponse:
    """One task and its allocations (404 if unknown)."""
    task = session.get(Task, task_id)
    if task is None:
        raise NotFoundError(f"task {task_id} not found")
    allocations = session.scalars(
        select(Allocation).where(Allocation.task_id == task_id).order_by(Allocation.start_time)
    )
    return GetTaskResponse(task=task_to_wire(task, list(allocations)))


@router.get("/tasks/{task_id}/context_directory", response_model=GetTaskContextDirectoryResponse)
def get_context_directory(
    task_id: str, caller: CallerDep, session: SessionDep
) -> GetTaskContextDirectoryResponse:
    """The experiment's model definition as base64 ``.tar.gz`` (``""`` when it has none).

    A task token may only read its own task's; users read any they can see.
    """
    if caller.allocation_id is not None:
        alloc_service.authorize_task(
            session, task_id, user=caller.user, caller_allocation_id=caller.allocation_id
        )
    blob = alloc_service.context_directory(session, task_id)
    return GetTaskContextDirectoryResponse(b64_tgz=base64.b64encode(blob).decode() if blob else "")


@router.get("/tasks/{task_id}/acceleratorData", response_model=GetTaskAcceleratorDataResponse)
def get_accelerator_data(
    task_id: str, _caller: CallerDep, session: SessionDep
) -> GetTaskAcceleratorDataResponse:
    """What each allocation of the task reported about its accelerators."""
    if session.get(Task, task_id) is None:
        raise NotFoundError(f"task {task_id} not found")
    rows = session.scalars(
        select(Allocation).where(Allocation.task_id == task_id).order_by(Allocation.start_time)
    )
    data = [
        AcceleratorData.model_validate(a.accelerator_data)
        for a in rows
        if a.accelerator_data is not None
    ]
    return GetTaskAcceleratorDataResponse(accelerator_data=data)
