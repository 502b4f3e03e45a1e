"""Routes: workspaces (``/api/v1/workspaces``...): list, read, create, change, archive, pin,
delete; the rules are :mod:`stalwart.master.services.workspaces`'.

The official client resolves workspace names through the list (``det workspace describe``,
``-w NAME``). A caller sees the workspaces where their role is viewer or more
(:mod:`stalwart.master.policy`); ``pinned`` is the caller's own pin. Secrets in a workspace's
checkpoint storage (access keys) are masked in every answer.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import Empty, paginate, wire_time
from stalwart.master.api.models.workspaces import (
    AgentUserGroup,
    DeleteWorkspaceResponse,
    GetWorkspaceResponse,
    GetWorkspacesResponse,
    PatchWorkspaceRequest,
    PatchWorkspaceResponse,
    PostWorkspaceRequest,
    PostWorkspaceResponse,
    V1Workspace,
)
from stalwart.master.redact import redact_config
from stalwart.master.rm.base import EnginePools
from stalwart.master.services import workspaces as svc
from stalwart.master.services.users import AgentLink
from stalwart.master.state import MasterState

__all__ = ["router", "workspace_to_wire"]

router = APIRouter(tags=["workspaces"])


def workspace_to_wire(view: svc.WorkspaceView) -> V1Workspace:
    """The ``v1Workspace`` of a workspace as its caller sees it."""
    w = view.workspace
    agent = None
    if any(v is not None for v in (w.agent_uid, w.agent_gid, w.agent_user, w.agent_group)):
        agent = AgentUserGroup(
            agent_uid=w.agent_uid,
            agent_gid=w.agent_gid,
            agent_user=w.agent_user,
            agent_group=w.agent_group,
        )
    return V1Workspace(
        id=w.id,
        name=w.name,
        archived=w.archived,
        username=view.owner.username if view.owner is not None else "",
        user_id=view.owner.id if view.owner is not None else 0,
        immutable=w.immutable,
        num_projects=view.num_projects,
        num_experiments=view.num_experiments,
        pinned=view.pinned_at is not None,
        pinned_at=wire_time(view.pinned_at),
        state="WORKSPACE_STATE_UNSPECIFIED",
        error_message="",
        agent_user_group=agent,
        checkpoint_storage_config=(
            redact_config(w.checkpoint_storage) if w.checkpoint_storage else None
        ),
        default_compute_pool=w.default_compute_pool,
        default_aux_pool=w.default_aux_pool,
    )


def _agent(group: AgentUserGroup | None) -> AgentLink | None:
    if group is None:
        return None
    return AgentLink(
        uid=group.agent_uid, gid=group.agent_gid, user=group.agent_user, group=group.agent_group
    )


def _pool_check(state: MasterState) -> svc.PoolCheck | None:
    return state.rm.check_pool if isinstance(state.rm, EnginePools) else None


@router.get("/workspaces", response_model=GetWorkspacesResponse)
def get_workspaces(
    caller: CallerDep,
    session: SessionDep,
    name: str | None = None,
    name_case_sensitive: Annotated[str | None, Query(alias="nameCaseSensitive")] = None,
    archived: bool | None = None,
    pinned: bool | None = None,
    users: Annotated[list[str] | None, Query()] = None,
    user_ids: Annotated[list[int] | None, Query(alias="userIds")] = None,
    sort_by: Annotated[str, Query(alias="sortBy")] = "SORT_BY_UNSPECIFIED",
    order_by: Annotated[str, Query(alias="orderBy")] = "ORDER_BY_UNSPECIFIED",
    offset: int = 0,
    limit: Annotated[int, Query(ge=0)] = 0,
) -> GetWorkspacesResponse:
    """The workspaces the caller may see (``name``: exact, case-insensitive;
    ``nameCaseSensitive``: exact), by id or name."""
    visible = svc.list_workspaces(
        session,
        caller.user,
        name=name,
        name_case_sensitive=name_case_sensitive,
        archived=archived,
        pinned=pinned,
        users=users or (),
        user_ids=user_ids or (),
        sort_by_name=sort_by == "SORT_BY_NAME",
        descending=order_by == "ORDER_BY_DESC",
    )
    start, end, page = paginate(len(visible), offset, limit)
    return GetWorkspacesResponse(
        workspaces=[workspace_to_wire(v) for v in visible[start:end]], pagination=page
    )


@router.get("/workspaces/{workspace_id}", response_model=GetWorkspaceResponse)
def get_workspace(
    workspace_id: int, caller: CallerDep, session: SessionDep
) -> GetWorkspaceResponse:
    """One workspace (404 when unknown or not visible to the caller)."""
    return GetWorkspaceResponse(
        workspace=workspace_to_wire(svc.get_workspace(session, caller.user, workspace_id))
    )


@router.post("/workspaces", response_model=PostWorkspaceResponse)
def post_workspace(
    body: PostWorkspaceRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> PostWorkspaceResponse:
    """Create a workspace; its creator becomes its admin and has it pinned."""
    change = svc.WorkspaceChange(
        agent=_agent(body.agent_user_group),
        checkpoint_storage=body.checkpoint_storage_config,
        default_compute_pool=body.default_compute_pool,
        default_aux_pool=body.default_aux_pool,
    )
    view = svc.create_workspace(
        session, caller.user, body.name, change, check_pool=_pool_check(state)
    )
    return PostWorkspaceResponse(workspace=workspace_to_wire(view))


@router.patch("/workspaces/{workspace_id}", response_model=PatchWorkspaceResponse)
def patch_workspace(
    workspace_id: int,
    body: PatchWorkspaceRequest,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> PatchWorkspaceResponse:
    """Rename a workspace or change its settings (workspace admins; the agent user: cluster
    admins)."""
    change = svc.WorkspaceChange(
        name=body.name,
        agent=_agent(body.agent_user_group),
        checkpoint_storage=body.checkpoint_storage_config,
        default_compute_pool=(
            body.default_compute_pool
            if body.default_compute_pool is not None
            else body.default_compute_resource_pool
        ),
        default_aux_pool=(
            body.default_aux_pool
            if body.default_aux_pool is not None
            else body.default_aux_resource_pool
        ),
    )
    view = svc.patch_workspace(
        session, caller.user, workspace_id, change, check_pool=_pool_check(state)
    )
    return PatchWorkspaceResponse(workspace=workspace_to_wire(view))


@router.delete("/workspaces/{workspace_id}", response_model=DeleteWorkspaceResponse)
def delete_workspace(
    workspace_id: int, caller: CallerDep, session: SessionDep
) -> DeleteWorkspaceResponse:
    """Delete an empty workspace (400 while it holds experiments or running tasks)."""
    svc.delete_workspace(session, caller.user, workspace_id)
    return DeleteWorkspaceResponse(completed=True)


@router.post("/workspaces/{workspace_id}/archive", response_model=Empty)
def archive_workspace(workspace_id: int, caller: CallerDep, session: SessionDep) -> Empty:
    """Archive a workspace."""
    svc.set_archived(session, caller.user, workspace_id, True)
    return Empty()


@router.post("/workspaces/{workspace_id}/unarchive", response_model=Empty)
def unarchive_workspace(workspace_id: int, caller: CallerDep, session: SessionDep) -> Empty:
    """Unarchive a workspace."""
    svc.set_archived(session, caller.user, workspace_id, False)
    return Empty()


@router.post("/workspaces/{workspace_id}/pin", response_model=Empty)
def pin_workspace(workspace_id: int, caller: CallerDep, session: SessionDep) -> Empty:
    """Pin a workspace for the caller."""
    svc.set_pinned(session, caller.user, workspace_id, True)
    return Empty()


@router.post("/workspaces/{workspace_id}/unpin", response_model=Empty)
def unpin_workspace(workspace_id: int, caller: CallerDep, session: SessionDep) -> Empty:
    """Unpin a workspace for the caller."""
    svc.set_pinned(session, caller.user, workspace_id, False)
    return Empty()
