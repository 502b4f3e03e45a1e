"""Routes: resource pools bound to workspaces (``det resource-pool bindings list-workspaces/
add/remove/replace``).

``GET /api/v1/resource-pools/{name}/workspace-bindings`` answers anyone logged in (the bound
workspaces they may see); ``POST`` (add), ``DELETE`` (remove) and ``PUT`` (replace) cluster
admins only. The pool must be one the master knows (``GET /resource-pools``) and not a default
pool: those serve every workspace. What a binding means is
:mod:`stalwart.master.services.pool_bindings`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated

from fastapi import APIRouter, Depends
from sqlalchemy.orm import Session

from stalwart.errors import FailedPreconditionError, ForbiddenError, NotFoundError
from stalwart.master import policy
from stalwart.master.api.deps import Caller, CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import Empty, paginate
from stalwart.master.api.models.groups import (
    AvailablePoolsResponse,
    PoolBindingsRequest,
    PoolBindingsResponse,
)
from stalwart.master.db.tables import Workspace
from stalwart.master.rm.base import EnginePools
from stalwart.master.services import agents as agent_service
from stalwart.master.services import pool_bindings as svc
from stalwart.master.state import MasterState

__all__ = ["known_pools", "router"]

router = APIRouter(tags=["resource pools"])

_PATH = "/resource-pools/{pool_name}/workspace-bindings"


def known_pools(state: MasterState, session: Session) -> tuple[list[str], set[str]]:
    """The master's resource pools (as ``GET /resource-pools`` lists them) and its default
    ones."""
    engine = state.rm if isinstance(state.rm, EnginePools) else None
    if engine is not None and (partitions := engine.engine_pools(session)):
        return [p.view.name for p in partitions], {p.view.name for p in partitions if p.default}
    pools = agent_service.resource_pools(session, state.settings.resource_pools)
    return [p.name for p in pools], {"default"}


def _pool_admin(caller: CallerDep) -> Caller:
    if not caller.user.admin:
        raise ForbiddenError(
            f"user {caller.user.username} cannot change resource pool bindings: only a cluster "
            "admin can"
        )
    return caller


AdminDep = Annotated[Caller, Depends(_pool_admin)]


def _bindable(state: MasterState, session: Session, pool: str) -> str:
    names, defaults = known_pools(state, session)
    if pool not in names:
        raise NotFoundError(
            f"resource pool '{pool}' not found (this master's pools: {', '.join(names)})"
        )
    if pool in defaults:
        raise FailedPreconditionError(
            f"resource pool '{pool}' is a default pool: it serves every workspace and cannot be "
            "bound (bind another pool)"
        )
    return pool


@router.get(_PATH, response_model=PoolBindingsResponse)
def list_bindings(
    pool_name: str,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    offset: int = 0,
    limit: int = 0,
) -> PoolBindingsResponse:
    """The workspaces the pool is bound to (those the caller may see), by id."""
    names, _ = known_pools(state, session)
    if pool_name not in names:
        raise NotFoundError(f"resource pool '{pool_name}' not found")
    bound = [
        w
        for w in svc.bound_workspaces(session, pool_name)
        if policy.workspace_role(session, caller.user, w) >= policy.Role.VIEWER
    ]
    start, end, page = paginate(len(bound), offset, limit)
    return PoolBindingsResponse(workspace_ids=bound[start:end], pagination=page)


def _change(
    change: Callable[[Session, str, Sequence[Workspace]], None],
    pool_name: str,
    body: PoolBindingsRequest,
    session: Session,
    state: MasterState,
) -> Empty:
    pool = _bindable(state, session, pool_name)
    workspaces = svc.resolve_workspaces(session, body.workspace_ids, body.workspace_names)
    change(session, pool, workspaces)
    return Empty()


@router.post(_PATH, response_model=Empty)
def add_bindings(
    pool_name: str,
    body: PoolBindingsRequest,
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
) -> Empty:
    """Bind the pool to more workspaces (cluster admins)."""
    return _change(svc.bind, pool_name, body, session, state)


@router.delete(_PATH, response_model=Empty)
def remove_bindings(
    pool_name: str,
    body: PoolBindingsRequest,
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
) -> Empty:
    """Unbind the pool from workspaces; with none left it serves everyone (cluster admins)."""
    return _change(svc.unbind, pool_name, body, session, state)


@router.put(_PATH, response_model=Empty)
def replace_bindings(
    pool_name: str,
    body: PoolBindingsRequest,
    _admin: AdminDep,
    session: SessionDep,
    state: StateDep,
) -> Empty:
    """Bind the pool to exactly these workspaces (cluster admins)."""
    return _change(svc.replace, pool_name, body, session, state)


@router.get(
    "/workspaces/{workspace_id}/available-resource-pools", response_model=AvailablePoolsResponse
)
def available_pools(
    workspace_id: int,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    offset: int = 0,
    limit: int = 0,
) -> AvailablePoolsResponse:
    """The pools the workspace's experiments and tasks may use (``det workspace list-pools``):
    the master's pools that are bound to no workspace or bound to this one, in the master's
    order. 404 for an unknown workspace (or one the caller has no role in)."""
    if session.get(Workspace, workspace_id) is None:
        raise NotFoundError(f"workspace {workspace_id} not found")
    names, _ = known_pools(state, session)
    usable = [p for p in names if svc.pool_usable(session, p, workspace_id)]
    start, end, page = paginate(len(usable), offset, limit)
    return AvailablePoolsResponse(resource_pools=usable[start:end], pagination=page)
