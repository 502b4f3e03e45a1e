"""Routes: Determined's role assignments (``det rbac list-roles/assign-role/unassign-role/
list-groups-roles/list-users-roles``) onto Stalwart's four workspace roles.

``POST /api/v1/roles/search`` and ``/roles/search/by-assignability`` list the roles (Viewer,
Member, Editor, WorkspaceAdmin); ``POST /roles/add-assignments`` and ``/roles/remove-assignments``
give and take them in workspaces (workspace admins and cluster admins);
``GET /roles/search/by-group/{id}`` and ``/by-user/{id}`` and ``POST /roles/search/by-ids``
say where a group or user has which, and ``GET /permissions/summary`` what the caller may do
where (only workspaces the caller may see). The mapping and its limits are
:mod:`stalwart.master.services.rbac`'s.
"""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import Empty, paginate
from stalwart.master.api.models.groups import (
    AssignRolesRequest,
    GetPermissionsSummaryResponse,
    GetRolesAssignedToGroupResponse,
    GetRolesAssignedToUserResponse,
    GetRolesByIdRequest,
    GetRolesByIdResponse,
    GroupRoleAssignment,
    ListRolesRequest,
    ListRolesResponse,
    RoleAssignmentSummary,
    RoleWithAssignments,
    ScopeTypeMask,
    UserRoleAssignment,
    V1Permission,
    V1Role,
    V1RoleAssignment,
)
from stalwart.master.db.tables import User
from stalwart.master.services import rbac

__all__ = ["router"]

router = APIRouter(tags=["roles"])


def _role(role: policy.Role) -> V1Role:
    mask = ScopeTypeMask(cluster=False, workspace=True)
    return V1Role(
        role_id=role.value,
        name=rbac.ROLE_NAMES[role],
        permissions=[
            V1Permission(id=kind, name=what, scope_type_mask=mask)
            for kind, what in rbac.permissions(role)
        ],
        scope_type_mask=mask,
    )


def _list(body: ListRolesRequest) -> ListRolesResponse:
    roles = [_role(r) for r in rbac.ROLE_NAMES]
    start, end, page = paginate(len(roles), body.offset, body.limit)
    return ListRolesResponse(roles=roles[start:end], pagination=page)


@router.post("/roles/search", response_model=ListRolesResponse)
def list_roles(body: ListRolesRequest, _caller: CallerDep) -> ListRolesResponse:
    """The four workspace roles under their Determined names."""
    return _list(body)


@router.post("/roles/search/by-assignability", response_model=ListRolesResponse)
def search_roles_assignable(body: ListRolesRequest, _caller: CallerDep) -> ListRolesResponse:
    """The roles that can be given (in any workspace: all four)."""
    return _list(body)


def _grants(body: AssignRolesRequest) -> list[rbac.GrantTo]:
    grants = [
        rbac.GrantTo(
            role_id=a.role_assignment.role.role_id,
            workspace_id=a.role_assignment.scope_workspace_id,
            user_id=a.user_id,
        )
        for a in body.user_role_assignments
    ]
    grants += [
        rbac.GrantTo(
            role_id=a.role_assignment.role.role_id,
            workspace_id=a.role_assignment.scope_workspace_id,
            group_id=a.group_id,
        )
        for a in body.group_role_assignments
    ]
    return grants


@router.post("/roles/add-assignments", response_model=Empty)
def assign_roles(body: AssignRolesRequest, caller: CallerDep, session: SessionDep) -> Empty:
    """Give roles to users and groups in workspaces (replacing the one they had there)."""
    rbac.apply_assignments(session, caller.user, _grants(body), remove=False)
    return Empty()


@router.post("/roles/remove-assignments", response_model=Empty)
def remove_assignments(body: AssignRolesRequest, caller: CallerDep, session: SessionDep) -> Empty:
    """Take roles given to users and groups in workspaces away."""
    rbac.apply_assignments(session, caller.user, _grants(body), remove=True)
    return Empty()


def _visible(session: Session, user: User, workspace_id: int) -> bool:
    return policy.workspace_role(session, user, workspace_id) >= policy.Role.VIEWER


@router.get("/roles/search/by-group/{group_id}", response_model=GetRolesAssignedToGroupResponse)
def roles_of_group(
    group_id: int, caller: CallerDep, session: SessionDep
) -> GetRolesAssignedToGroupResponse:
    """The roles given to a group, each with its workspaces."""
    roles: list[V1Role] = []
    summaries: list[RoleAssignmentSummary] = []
    for role, workspaces in rbac.group_roles(session, group_id).items():
        shown = [w for w in workspaces if _visible(session, caller.user, w)]
        if shown:
            roles.append(_role(role))
            summaries.append(RoleAssignmentSummary(role_id=role.value, scope_workspace_ids=shown))
    return GetRolesAssignedToGroupResponse(roles=roles, assignments=summaries)


def _assignment(role: policy.Role, workspace_id: int) -> V1RoleAssignment:
    return V1RoleAssignment(role=_role(role), scope_workspace_id=workspace_id, scope_cluster=False)


@router.get("/roles/search/by-user/{user_id}", response_model=GetRolesAssignedToUserResponse)
def roles_of_user(
    user_id: int, caller: CallerDep, session: SessionDep
) -> GetRolesAssignedToUserResponse:
    """The roles given to a user and to the groups they are in, with their workspaces."""
    found = rbac.user_roles(session, user_id)
    out: list[RoleWithAssignments] = []
    for role in rbac.ROLE_NAMES:
        own = [
            UserRoleAssignment(user_id=user_id, role_assignment=_assignment(role, w))
            for w in found.own.get(role, [])
            if _visible(session, caller.user, w)
        ]
        groups = [
            GroupRoleAssignment(group_id=g, role_assignment=_assignment(role, w))
            for g, w in found.through_groups.get(role, [])
            if _visible(session, caller.user, w)
        ]
        if own or groups:
            out.append(
                RoleWithAssignments(
                    role=_role(role), user_role_assignments=own, group_role_assignments=groups
                )
            )
    return GetRolesAssignedToUserResponse(roles=out)


@router.post("/roles/search/by-ids", response_model=GetRolesByIdResponse)
def roles_by_id(
    body: GetRolesByIdRequest, caller: CallerDep, session: SessionDep
) -> GetRolesByIdResponse:
    """Roles by id, each with the users and groups it is given to (``det rbac describe-role``)."""
    out: list[RoleWithAssignments] = []
    for role_id in body.role_ids:
        role = rbac.role_for_id(role_id)
        users, groups = rbac.role_holders(session, role)
        out.append(
            RoleWithAssignments(
                role=_role(role),
                user_role_assignments=[
                    UserRoleAssignment(user_id=u, role_assignment=_assignment(role, w))
                    for u, w in users
                    if _visible(session, caller.user, w)
                ],
                group_role_assignments=[
                    GroupRoleAssignment(group_id=g, role_assignment=_assignment(role, w))
                    for g, w in groups
                    if _visible(session, caller.user, w)
                ],
            )
        )
    return GetRolesByIdResponse(roles=out)


@router.get("/permissions/summary", response_model=GetPermissionsSummaryResponse)
def permissions_summary(caller: CallerDep, session: SessionDep) -> GetPermissionsSummaryResponse:
    """The caller's role in each workspace they may see (``det rbac my-permissions``): their own,
    their groups' or the default, whichever is highest; cluster-wide for a cluster admin."""
    if caller.user.admin:
        admin = policy.Role.ADMIN
        summary = RoleAssignmentSummary(
            role_id=admin.value, scope_workspace_ids=[], scope_cluster=True
        )
        return GetPermissionsSummaryResponse(roles=[_role(admin)], assignments=[summary])
    where: dict[policy.Role, list[int]] = {}
    for workspace_id, role in rbac.effective_roles(session, caller.user).items():
        where.setdefault(role, []).append(workspace_id)
    ordered = sorted(where)
    return GetPermissionsSummaryResponse(
        roles=[_role(r) for r in ordered],
        assignments=[
            RoleAssignmentSummary(role_id=r.value, scope_workspace_ids=where[r]) for r in ordered
        ],
    )
