"""Routes: the master's proxy to interactive tasks, ``/proxy/{task_id}/...`` (HTTP and
WebSocket), as Determined serves it.

Who may pass (:func:`_authorize`):

- a notebook's own token (``?token=`` or ``Authorization: token T``, the one in its
  ``serviceAddress``) opens that notebook only, as its owner;
- otherwise a user session (``Authorization: Bearer``, or the web UI's ``auth`` cookie): a
  TensorBoard is open to whoever may see its workspace; a notebook, command or generic task
  runs code as its owner, so only the owner or an admin reaches it (403 for anyone else);
- a shell's tunnel (a WebSocket carrying ssh) needs no master credentials, as the official
  ``determined.cli.tunnel`` sends none: ssh authenticates with the shell's own key pair.

Where it goes (:func:`_target`): the task's newest running allocation, at the address its
resource manager reports (:class:`~stalwart.master.rm.base.ServiceAddresses`) and its
``DET_SERVICE_PORT``. 404 for an unknown task, 503 (try again) while it is not ready. Every
request that passes counts as activity for the task's ``idle_timeout``. The forwarding itself
(streaming, headers, WebSocket bridging, the TCP tunnel) is :mod:`stalwart.master.proxy`.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from stalwart.errors import (
    ForbiddenError,
    NotFoundError,
    StalwartError,
    UnauthenticatedError,
    UnavailableError,
)
from stalwart.master.api.deps import user_of_token
from stalwart.master.db.tables import Allocation, Task, User
from stalwart.master.proxy import (
    ProxyTarget,
    forward_http,
    forward_websocket,
    request_path,
    tunnel_tcp,
)
from stalwart.master.rm.base import ServiceAddresses
from stalwart.master.services import interactive
from stalwart.master.state import MasterState

__all__ = ["router"]

router = APIRouter(tags=["proxy"])

_WS_POLICY_VIOLATION = 1008
_WS_TRY_AGAIN = 1013


@dataclass(frozen=True)
class _Pass:
    target: ProxyTarget
    allocation_id: str


def _notebook_token(query_token: str | None, authorization: str | None) -> str | None:
    if query_token:
        return query_token
    if authorization and authorization.lower().startswith("token "):
        return authorization[6:].strip()
    return None


def _user(
    session: Session,
    state: MasterState,
    task: Task | None,
    *,
    query_token: str | None,
    authorization: str | None,
    cookie: str | None,
) -> User:
    """Who is asking (see the module docstring); UnauthenticatedError when no one."""
    token = _notebook_token(query_token, authorization)
    secret = (task.secrets or {}).get("notebook_token") if task is not None else None
    if (
        task is not None
        and token
        and isinstance(secret, str)
        and hmac.compare_digest(token, secret)
    ):
        owner = session.get(User, task.owner_id) if task.owner_id is not None else None
        if owner is not None and owner.active:
            return owner
    bearer = None
    if authorization and authorization.lower().startswith("bearer "):
        bearer = authorization[7:].strip()
    found = user_of_token(session, state, bearer or cookie or "")
    if found is None:
        raise UnauthenticatedError(
            "no credentials for this task: log in (det user login), or open the task's "
            "address as `det notebook open` or `det tensorboard open` gives it"
        )
    return found


def _may_use(session: Session, user: User, task: Task) -> None:
    if task.task_type == "TENSORBOARD":
        interactive.require_view(session, user, task)
        return
    if not user.admin and task.owner_id != user.id:
        interactive.require_view(session, user, task)  # 403 naming the workspace first
        raise ForbiddenError(
            f"user {user.username} cannot open {task.task_type.lower()} {task.task_id}: it "
            "runs code as its owner, so only its owner or an admin can"
        )


def _target(session: Session, state: MasterState, task: Task) -> tuple[ProxyTarget, Allocation]:
    allocation = interactive.latest_allocation(session, task.task_id)
    label = interactive.KIND_LABELS.get(task.task_type, "task")
    if allocation is None or allocation.state == "TERMINATED":
        raise NotFoundError(f"{label} {task.task_id} has ended (det task logs {task.task_id})")
    ports = allocation.ports or {}
    port = ports.get("DET_SERVICE_PORT")
    host = None
    if isinstance(state.rm, ServiceAddresses):
        host = state.rm.service_host(session, allocation.id)
    if not allocation.is_ready or host is None or not isinstance(port, int):
        raise UnavailableError(
            f"{label} {task.task_id} is not ready yet ({interactive.task_state(task, allocation)}"
            "): try again in a moment"
        )
    return ProxyTarget(host=host, port=port, tcp=task.task_type == "SHELL"), allocation


def _pass(
    state: MasterState,
    task_id: str,
    *,
    tunnel: bool,
    query_token: str | None,
    authorization: str | None,
    cookie: str | None,
) -> _Pass:
    """Authorize and locate (see the module docstring); notes the activity. ``tunnel``: a
    WebSocket, which reaches a shell without master credentials."""
    with state.sessions() as session:
        task = session.get(Task, task_id)
        if task is not None and task.trial_id is not None:
            task = None  # a trial serves nothing through the proxy
        if not (tunnel and task is not None and task.task_type == "SHELL"):
            user = _user(
                session,
                state,
                task,
                query_token=query_token,
                authorization=authorization,
                cookie=cookie,
            )
            if task is None:
                raise NotFoundError(f"task {task_id} not found")
            _may_use(session, user, task)
        if task is None:
            raise NotFoundError(f"task {task_id} not found")
        target, allocation = _target(session, state, task)
        if interactive.note_activity(allocation, state.clock.now()):
            session.commit()
        return _Pass(target, allocation.id)


def _state(request: Request | WebSocket) -> MasterState:
    state: MasterState = request.app.state.master
    return state


@router.api_route(
    "/proxy/{task_id}/{path:path}",
    methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
    include_in_schema=False,
)
async def proxy_http(task_id: str, path: str, request: Request) -> Response:
    """Forward one HTTP request to the task's service (streamed both ways)."""
    passed = await run_in_threadpool(
        _pass,
        _state(request),
        task_id,
        tunnel=False,
        query_token=request.query_params.get("token"),
        authorization=request.headers.get("authorization"),
        cookie=request.cookies.get("auth"),
    )
    return await forward_http(request, passed.target, request_path(request))


@router.websocket("/proxy/{task_id}/{path:path}")
async def proxy_websocket(websocket: WebSocket, task_id: str, path: str) -> None:
    """Bridge a WebSocket to the task's service (a shell: raw TCP to its sshd)."""
    try:
        passed = await run_in_threadpool(
            _pass,
            _state(websocket),
            task_id,
            tunnel=True,
            query_token=websocket.query_params.get("token"),
            authorization=websocket.headers.get("authorization"),
            cookie=websocket.cookies.get("auth"),
        )
    except UnavailableError as exc:
        await websocket.close(code=_WS_TRY_AGAIN, reason=str(exc)[:120])
        return
    except StalwartError as exc:
        await websocket.close(code=_WS_POLICY_VIOLATION, reason=str(exc)[:120])
        return
    if passed.target.tcp:
        await tunnel_tcp(websocket, passed.target)
    else:
        await forward_websocket(websocket, passed.target, request_path(websocket))
