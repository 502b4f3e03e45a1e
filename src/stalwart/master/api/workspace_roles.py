"""Routes: workspace role assignments (a Stalwart extension; see docs/security.md).

``GET /api/v1/workspaces/{id}/roles`` (anyone who may see the workspace),
``PUT``/``DELETE /api/v1/workspaces/{id}/roles/users/{userId}`` and
``PUT /api/v1/workspaces/{id}/roles/default`` (workspace admins and cluster admins). The rules
are :mod:`stalwart.master.policy`'s.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field

from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import WireModel, WireRequest
from stalwart.master.policy import require_manage_workspace
from stalwart.master.services import workspace_roles as svc

__all__ = ["RoleAssignment", "SetRoleRequest", "WorkspaceRolesResponse", "router"]

router = APIRouter(tags=["workspaces"])


class RoleAssignment(WireModel):
    """One user's role in the workspace."""

    user_id: int = Field(description="The user.")
    username: str = Field(description="Their username.")
    role: str = Field(description="viewer, member, editor or admin.")


class WorkspaceRolesResponse(WireModel):
    """A workspace's default role and its role assignments."""

    workspace_id: int = Field(description="The workspace.")
    default_role: str = Field(description="Role of users without an assignment.")
    assignments: list[RoleAssignment] = Field(description="Assignments, by user id.")


class SetRoleRequest(WireRequest):
    """The role to give."""

    role: str = Field(description="viewer, member, editor or admin (default: none too).")


def _answer(roles: svc.WorkspaceRoles) -> WorkspaceRolesResponse:
    return WorkspaceRolesResponse(
        workspace_id=roles.workspace_id,
        default_role=roles.default_role.label,
        assignments=[
            RoleAssignment(user_id=a.user_id, username=a.username, role=a.role.label)
            for a in roles.assignments
        ],
    )


@router.get("/workspaces/{workspace_id}/roles", response_model=WorkspaceRolesResponse)
def get_workspace_roles(
    workspace_id: int, _caller: CallerDep, session: SessionDep
) -> WorkspaceRolesResponse:
    """The workspace's default role and role assignments."""
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


@router.put("/workspaces/{workspace_id}/roles/default", response_model=WorkspaceRolesResponse)
def set_default_workspace_role(
    workspace_id: int, body: SetRoleRequest, caller: CallerDep, session: SessionDep
) -> WorkspaceRolesResponse:
    """Set the role of users without an assignment (none, viewer, member or editor)."""
    require_manage_workspace(session, caller.user, workspace_id)
    svc.set_default_role(session, workspace_id, body.role)
    return _answer(svc.get_roles(session, workspace_id))
