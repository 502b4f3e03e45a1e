"""Routes: workspace role assignments (a Stalwart extension; see docs/security.md).

``GET /api/v1/workspaces/{id}/roles`` (anyone who may see the workspace),
``PUT``/``DELETE /api/v1/workspaces/{id}/roles/users/{userId}``,
``PUT``/``DELETE /api/v1/workspaces/{id}/roles/groups/{groupId}`` and
``PUT /api/v1/workspaces/{id}/roles/default`` (workspace admins and cluster admins). The rules
are :mod:`stalwart.master.policy`'s.
"""

from __future__ import annotations

from fastapi import APIRouter

from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.groups import (
    SetRoleRequest,
    WorkspaceGroupRole,
    WorkspaceRolesResponse,
    WorkspaceUserRole,
)
from stalwart.master.policy import require_manage_workspace, require_view_workspace
from stalwart.master.services import workspace_roles as svc

__all__ = ["router"]

router = APIRouter(tags=["workspaces"])


def _answer(roles: svc.WorkspaceRoles) -> WorkspaceRolesResponse:
    return WorkspaceRolesResponse(
        workspace_id=roles.workspace_id,
        default_role=roles.default_role.label,
        assignments=[
            WorkspaceUserRole(user_id=a.user_id, username=a.username, role=a.role.label)
            for a in roles.assignments
        ],
        group_assignments=[
            WorkspaceGroupRole(group_id=g.group_id, group_name=g.group_name, role=g.role.label)
            for g in roles.group_assignments
        ],
    )


@router.get("/workspaces/{workspace_id}/roles", response_model=WorkspaceRolesResponse)
def get_workspace_roles(
    workspace_id: int, caller: CallerDep, session: SessionDep
) -> WorkspaceRolesResponse:
    """The workspace's default role and role assignments (404 for a workspace the caller may
    not see: who holds roles in it is not revealed either)."""
    require_view_workspace(session, caller.user, workspace_id)
    return _answer(svc.get_roles(session, workspace_id))


@router.put(
    "/workspaces/{workspace_id}/roles/users/{user_id}", response_model=WorkspaceRolesResponse
)
def set_workspace_role(
    workspace_id: int, user_id: int, body: SetRoleRequest, caller: CallerDep, session: SessionDep
) -> WorkspaceRolesResponse:
    """Give a user a role in the workspace (replacing their previous one)."""
    require_manage_workspace(session, caller.user, workspace_id)
    svc.set_role(session, workspace_id, user_id, body.role)
    return _answer(svc.get_roles(session, workspace_id))


@router.delete(
    "/workspaces/{workspace_id}/roles/users/{user_id}", response_model=WorkspaceRolesResponse
)
def remove_workspace_role(
    workspace_id: int, user_id: int, caller: CallerDep, session: SessionDep
) -> WorkspaceRolesResponse:
    """Remove a user's assignment: they get the workspace's default role."""
    require_manage_workspace(session, caller.user, workspace_id)
    svc.remove_role(session, workspace_id, user_id)
    return _answer(svc.get_roles(session, workspace_id))


@router.put(
    "/workspaces/{workspace_id}/roles/groups/{group_id}", response_model=WorkspaceRolesResponse
)
def set_workspace_group_role(
    workspace_id: int, group_id: int, body: SetRoleRequest, caller: CallerDep, session: SessionDep
) -> WorkspaceRolesResponse:
    """Give a user group a role in the workspace (replacing its previous one)."""
    require_manage_workspace(session, caller.user, workspace_id)
    svc.set_group_role(session, workspace_id, group_id, body.role)
    return _answer(svc.get_roles(session, workspace_id))


@router.delete(
    "/workspaces/{workspace_id}/roles/groups/{group_id}", response_model=WorkspaceRolesResponse
)
def remove_workspace_group_role(
    workspace_id: int, group_id: int, caller: CallerDep, session: SessionDep
) -> WorkspaceRolesResponse:
    """Remove a user group's role in the workspace."""
    require_manage_workspace(session, caller.user, workspace_id)
    svc.remove_group_role(session, workspace_id, group_id)
    return _answer(svc.get_roles(session, workspace_id))


@router.put("/workspaces/{workspace_id}/roles/default", response_model=WorkspaceRolesResponse)
def set_default_workspace_role(
    workspace_id: int, body: SetRoleRequest, caller: CallerDep, session: SessionDep
) -> WorkspaceRolesResponse:
    """Set the role of users without an assignment (none, viewer, member or editor)."""
    require_manage_workspace(session, caller.user, workspace_id)
    svc.set_default_role(session, workspace_id, body.role)
    return _answer(svc.get_roles(session, workspace_id))
