"""Routes: commands, notebooks, shells, TensorBoards (``det cmd|notebook|shell|tensorboard``)
and generic tasks (``det task create``).

The four kinds share one set of routes, made per kind by :func:`_routes`:
``POST /{kinds}`` (launch), ``GET /{kinds}`` (list; ``users``, ``userIds``, ``workspaceId``),
``GET /{kinds}/{id}``, ``POST /{kinds}/{id}/kill``, ``POST /{kinds}/{id}/set_priority``. Logs go
through the task log routes (``/tasks/{id}/logs``), as the client follows them. The logic is
in :mod:`stalwart.master.services.interactive`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from stalwart.config.command import TaskKind
from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import Empty, paginate, wire_time
from stalwart.master.api.models.interactive import (
    CreateGenericTaskRequest,
    CreateGenericTaskResponse,
    LaunchRequest,
    ReportIdleRequest,
    V1InteractiveTask,
    V1TaskContainer,
)
from stalwart.master.cluster.lifecycle import master_log
from stalwart.master.db.tables import Allocation, Container, Project, Task, User, utcnow
from stalwart.master.services import interactive as svc
from stalwart.master.services import job_queue
from stalwart.master.services.templates import template_config
from stalwart.master.state import MasterState

__all__ = ["router"]

router = APIRouter(tags=["interactive tasks"])

_KINDS: dict[TaskKind, tuple[str, str]] = {
    "COMMAND": ("commands", "command"),
    "NOTEBOOK": ("notebooks", "notebook"),
    "SHELL": ("shells", "shell"),
    "TENSORBOARD": ("tensorboards", "tensorboard"),
}
"""Each kind's path segment and the key its object travels under."""

_CONTAINER_STATES = {
    "ASSIGNED": "STATE_ASSIGNED",
    "STARTING": "STATE_STARTING",
    "RUNNING": "STATE_RUNNING",
    "EXITED": "STATE_TERMINATED",
}


def _container(session: Session, allocation: Allocation | None) -> V1TaskContainer | None:
    if allocation is None:
        return None
    row = session.get(Container, (allocation.id, 0))
    if row is None:
        return None
    return V1TaskContainer(
        id=f"{allocation.id}.0", state=_CONTAINER_STATES.get(row.state, "STATE_UNSPECIFIED")
    )


def _service_address(task: Task) -> str | None:
    if task.task_type == "NOTEBOOK":
        token = (task.secrets or {}).get("notebook_token", "")
        return f"/proxy/{task.task_id}/lab?token={token}"
    if task.task_type == "TENSORBOARD":
        return f"/proxy/{task.task_id}/"
    return None


def task_to_wire(session: Session, task: Task) -> V1InteractiveTask:
    """The wire form of an interactive task, for its owner's or a viewer's eyes: secrets (the
    notebook token in ``serviceAddress``, a shell's private key) only for the owner or an
    admin is the caller's business (:func:`_for_caller`)."""
    allocation = svc.latest_allocation(session, task.task_id)
    owner = session.get(User, task.owner_id) if task.owner_id is not None else None
    config = svc.task_config(task)
    wire = V1InteractiveTask(
        id=task.task_id,
        description=config.description or task.name,
        state=svc.task_state(task, allocation),
        start_time=wire_time(task.start_time) or "",
        username=owner.username if owner is not None else "",
        user_id=owner.id if owner is not None else None,
        display_name=(owner.display_name or "") if owner is not None else None,
        resource_pool=allocation.resource_pool if allocation is not None else "default",
        job_id=task.task_id,
        workspace_id=task.workspace_id or 1,
        exit_status=svc.exit_status(allocation),
        container=_container(session, allocation),
        service_address=_service_address(task),
    )
    if task.task_type == "SHELL":
        keys = task.secrets or {}
        wire.private_key = keys.get("private_key")
        wire.public_key = keys.get("public_key")
        wire.agent_user_group = {"user": svc.shell_user(session, task, owner)}
        wire.addresses = []
    if task.task_type == "TENSORBOARD":
        extra = task.extra or {}
        wire.experiment_ids = list(extra.get("experiment_ids") or [])
        wire.trial_ids = list(extra.get("trial_ids") or [])
    return wire


def _for_caller(wire: V1InteractiveTask, task: Task, user: User) -> V1InteractiveTask:
    """Hide the task's secrets from anyone but its owner and admins."""
    if user.admin or task.owner_id == user.id:
        return wire
    hidden: dict[str, str | None] = {"private_key": None}
    if wire.service_address and "token=" in wire.service_address:
        hidden["service_address"] = wire.service_address.split("?", 1)[0]
    return wire.model_copy(update=hidden)


def _one(session: Session, user: User, task: Task, key: str) -> dict[str, Any]:
    wire = _for_caller(task_to_wire(session, task), task, user)
    return {key: wire.model_dump(mode="json", by_alias=True), "config": task.config or {}}


def _launch(
    state: MasterState, session: Session, user: User, kind: TaskKind, body: LaunchRequest
) -> svc.Launch:
    return svc.Launch(
        kind=kind,
        config=body.config,
        files=[f.model_dump() for f in body.files or []],
        workspace_id=body.workspace_id,
        template_name=body.template_name,
        template=(
            template_config(session, user, body.template_name) if body.template_name else None
        ),
        experiment_ids=body.experiment_ids or [],
        trial_ids=body.trial_ids or [],
    )


def _preview_task(user: User, config: dict[str, Any], body: LaunchRequest) -> dict[str, Any]:
    """The task object of a preview (nothing is launched; the client requires the keys)."""
    return {
        "id": "",
        "description": str(config.get("description") or ""),
        "state": "STATE_UNSPECIFIED",
        "startTime": wire_time(utcnow()),
        "username": user.username,
        "resourcePool": str((config.get("resources") or {}).get("resource_pool") or "default"),
        "jobId": "",
        "workspaceId": body.workspace_id or 1,
    }


def _start(
    state: MasterState, session: Session, user: User, launch: svc.Launch
) -> tuple[Task, list[str]]:
    """Launch, log the notices in the task's log, commit, and wake the scheduler."""
    task, notices = svc.launch_task(session, state.settings, user, launch)
    for notice in notices:
        master_log(session, task.task_id, None, notice)
    session.commit()
    state.hints.poke()
    return task, notices


def _routes(kind: TaskKind) -> None:
    plural, key = _KINDS[kind]

    def launch(
        body: LaunchRequest, caller: CallerDep, session: SessionDep, state: StateDep
    ) -> JSONResponse:
        request = _launch(state, session, caller.user, kind, body)
        if body.preview:
            config, _ = svc.preview_config(state.settings, request)
            return JSONResponse({key: _preview_task(caller.user, config, body), "config": config})
        task, _ = _start(state, session, caller.user, request)
        answer = _one(session, caller.user, task, key)
        answer["warnings"] = []
        return JSONResponse(answer)

    def listing(
        caller: CallerDep,
        session: SessionDep,
        users: Annotated[list[str] | None, Query()] = None,
        user_ids: Annotated[list[int] | None, Query(alias="userIds")] = None,
        workspace_id: Annotated[int | None, Query(alias="workspaceId")] = None,
    ) -> JSONResponse:
        tasks = svc.list_tasks(
            session,
            caller.user,
            kind,
            usernames=users or (),
            user_ids=user_ids or (),
            workspace_id=workspace_id,
        )
        items = [
            _for_caller(task_to_wire(session, t), t, caller.user).model_dump(
                mode="json", by_alias=True
            )
            for t in tasks
        ]
        _, _, page = paginate(len(items))
        return JSONResponse({plural: items, "pagination": page.model_dump(by_alias=True)})

    def get_one(task_id: str, caller: CallerDep, session: SessionDep) -> JSONResponse:
        task = svc.get_task(session, caller.user, task_id, kind)
        return JSONResponse(_one(session, caller.user, task, key))

    def kill(task_id: str, caller: CallerDep, session: SessionDep, state: StateDep) -> JSONResponse:
        task = svc.get_task(session, caller.user, task_id, kind)
        with state.lifecycle:
            woken = svc.kill_task(session, caller.user, task)
            session.commit()
        state.wake(session, woken)
        state.hints.poke()
        return JSONResponse(
            {key: task_to_wire(session, task).model_dump(mode="json", by_alias=True)}
        )

    def set_priority(
        task_id: str,
        body: dict[str, Any],
        caller: CallerDep,
        session: SessionDep,
        state: StateDep,
    ) -> JSONResponse:
        """``det <kind> set priority``: as ``det job update --priority`` (the job queue's
        rules, :mod:`stalwart.master.services.job_queue`)."""
        task = svc.get_task(session, caller.user, task_id, kind)
        priority = body.get("priority")
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise InvalidArgumentError("priority must be a whole number between 1 and 99")
        job_queue.update_job(
            session,
            state.settings,
            caller.user,
            job_queue.JobUpdate(job_id=task.task_id, priority=priority),
        )
        state.hints.poke()
        return JSONResponse(
            {key: task_to_wire(session, task).model_dump(mode="json", by_alias=True)}
        )

    router.add_api_route(f"/{plural}", launch, methods=["POST"], name=f"launch_{key}")
    router.add_api_route(f"/{plural}", listing, methods=["GET"], name=f"list_{plural}")
    router.add_api_route(f"/{plural}/{{task_id}}", get_one, methods=["GET"], name=f"get_{key}")
    router.add_api_route(f"/{plural}/{{task_id}}/kill", kill, methods=["POST"], name=f"kill_{key}")
    router.add_api_route(
        f"/{plural}/{{task_id}}/set_priority",
        set_priority,
        methods=["POST"],
        name=f"set_{key}_priority",
    )


for _kind in _KINDS:
    _routes(_kind)


@router.put("/notebooks/{task_id}/report_idle", response_model=Empty)
def report_idle(
    task_id: str, body: ReportIdleRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """A notebook says whether it is idle (its own token only)."""
    task = session.get(Task, task_id)
    if task is None or task.task_type != "NOTEBOOK":
        raise NotFoundError(f"notebook {task_id} not found")
    svc.report_idle(session, task, body.idle, state.clock.now())
    session.commit()
    return Empty()


@router.post("/generic-tasks", response_model=CreateGenericTaskResponse)
def create_generic_task(
    body: CreateGenericTaskRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> CreateGenericTaskResponse:
    """``det task create CONFIG -c DIR``: a task running its own entrypoint."""
    try:
        config = yaml.safe_load(body.config) if body.config.strip() else {}
    except yaml.YAMLError as exc:
        raise InvalidArgumentError(f"invalid task configuration: {exc}") from None
    workspace_id = None
    if body.project_id is not None:
        project = session.get(Project, body.project_id)
        if project is None:
            raise NotFoundError(f"project {body.project_id} not found")
        workspace_id = project.workspace_id
    files = [f.model_dump() for f in body.context_directory or []]
    extra: dict[str, Any] = {}
    context = None
    if body.parent_id:
        extra["parent_id"] = body.parent_id
    if body.forked_from:
        forked = svc.get_task(session, caller.user, body.forked_from)
        extra["forked_from"] = forked.task_id
        if body.inherit_context or not files:
            files, context = [], forked.context
    launch = svc.Launch(
        kind="GENERIC",
        config=config if isinstance(config, dict) else None,
        files=files,
        context=context,
        workspace_id=workspace_id,
        extra=extra,
    )
    task, _ = _start(state, session, caller.user, launch)
    return CreateGenericTaskResponse(task_id=task.task_id)


@router.post("/tasks/{task_id}/kill", response_model=Empty)
def kill_generic_task(
    task_id: str, caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """``det task kill``: stop any interactive task."""
    task = svc.get_task(session, caller.user, task_id)
    with state.lifecycle:
        woken = svc.kill_task(session, caller.user, task)
        session.commit()
    state.wake(session, woken)
    state.hints.poke()
    return Empty()


@router.post("/tasks/{task_id}/pause", response_model=Empty)
def pause_generic_task(
    task_id: str, caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """``det task pause``: stop a generic task's run and keep the task, paused (see
    :func:`stalwart.master.services.interactive.pause_task`)."""
    task = svc.get_task(session, caller.user, task_id)
    with state.lifecycle:
        woken = svc.pause_task(session, task)
        session.commit()
    state.wake(session, woken)
    state.hints.poke()
    return Empty()


@router.post("/tasks/{task_id}/unpause", response_model=Empty)
def unpause_generic_task(
    task_id: str, caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """``det task unpause``: run a paused generic task's entrypoint again, in a new
    allocation."""
    task = svc.get_task(session, caller.user, task_id)
    with state.lifecycle:
        svc.unpause_task(session, task)
        session.commit()
    state.hints.poke()
    return Empty()


@router.get("/tasks/{task_id}/config")
def get_task_config(task_id: str, caller: CallerDep, session: SessionDep) -> JSONResponse:
    """``det task config``: an interactive task's config, as JSON text."""
    task = svc.get_task(session, caller.user, task_id)
    return JSONResponse({"config": json.dumps(task.config or {})})
