"""Wire models of user groups (``/api/v1/groups``), roles (``/api/v1/roles/...``), workspace role
assignments (Stalwart's ``/api/v1/workspaces/{id}/roles``) and resource pool bindings
(``/api/v1/resource-pools/{name}/workspace-bindings``).

The Determined shapes are those of the 0.38.1 bindings (``v1GroupDetails``, ``v1Role``,
``v1RoleAssignment``...); the routes are in ``api/user_groups.py``, ``api/rbac.py``,
``api/workspace_roles.py`` and ``api/pool_bindings.py``.
"""

from __future__ import annotations

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest
from stalwart.master.api.models.users import V1User

__all__ = [
    "AssignRolesRequest",
    "AvailablePoolsResponse",
    "CreateGroupRequest",
    "GetGroupsRequest",
    "GetGroupsResponse",
    "GetPermissionsSummaryResponse",
    "GetRolesAssignedToGroupResponse",
    "GetRolesAssignedToUserResponse",
    "GetRolesByIdRequest",
    "GetRolesByIdResponse",
    "GroupResponse",
    "GroupRoleAssignment",
    "GroupSearchResult",
    "ListRolesRequest",
    "ListRolesResponse",
    "PoolBindingsRequest",
    "PoolBindingsResponse",
    "RoleAssignmentSummary",
    "RoleWithAssignments",
    "ScopeTypeMask",
    "SetRoleRequest",
    "UpdateGroupRequest",
    "UserRoleAssignment",
    "V1Group",
    "V1GroupDetails",
    "V1Permission",
    "V1Role",
    "V1RoleAssignment",
    "WorkspaceGroupRole",
    "WorkspaceRolesResponse",
    "WorkspaceUserRole",
]


# --- user groups ---


class V1Group(WireModel):
    """``v1Group``: a group's id and name."""

    group_id: int = Field(description="The group's id.")
    name: str = Field(description="The group's name.")


class V1GroupDetails(V1Group):
    """``v1GroupDetails``: a group with its members."""

    users: list[V1User] = Field(default_factory=list, description="Members, by user id.")


class GroupSearchResult(WireModel):
    """``v1GroupSearchResult``: a group and how many members it has."""

    group: V1Group = Field(description="The group.")
    num_members: int = Field(description="How many users are in it.")


class GetGroupsRequest(WireRequest):
    """``v1GetGroupsRequest`` (``POST /groups/search``)."""

    limit: int = Field(default=0, description="At most this many (0: all).")
    offset: int = Field(default=0, description="Skip this many.")
    name: str | None = Field(default=None, description="Only the group with this exact name.")
    user_id: int | None = Field(default=None, description="Only groups this user is in.")


class GetGroupsResponse(WireModel):
    """``v1GetGroupsResponse``."""

    groups: list[GroupSearchResult] = Field(description="Groups, by id.")
    pagination: Pagination = Field(description="Where this page is.")


class CreateGroupRequest(WireRequest):
    """``v1CreateGroupRequest``."""

    name: str = Field(description="The new group's name.")
    add_users: list[int] = Field(default_factory=list, description="Ids of its first members.")


class UpdateGroupRequest(WireRequest):
    """``v1UpdateGroupRequest``: rename and/or change members."""

    group_id: int | None = Field(default=None, description="The group (also in the path).")
    name: str | None = Field(default=None, description="A new name.")
    add_users: list[int] = Field(default_factory=list, description="Ids of users to add.")
    remove_users: list[int] = Field(default_factory=list, description="Ids of users to remove.")


class GroupResponse(WireModel):
    """``v1CreateGroupResponse``, ``v1GetGroupResponse``, ``v1UpdateGroupResponse``."""

    group: V1GroupDetails = Field(description="The group and its members.")


# --- roles (det rbac) ---


class ScopeTypeMask(WireModel):
    """``v1ScopeTypeMask``: where a role may be given."""

    cluster: bool = Field(default=False, description="Cluster-wide (never, here).")
    workspace: bool = Field(default=True, description="In a workspace.")


class V1Permission(WireModel):
    """``v1Permission``: what a role allows, as the nearest Determined permission type and
    Stalwart's own words."""

    id: str = Field(description="A v1PermissionType (PERMISSION_TYPE_...).")
    name: str = Field(description="What it allows, in Stalwart's terms.")
    scope_type_mask: ScopeTypeMask | None = Field(default=None, description="Where it applies.")


class V1Role(WireModel):
    """``v1Role``: one of Stalwart's four workspace roles under a Determined name."""

    role_id: int = Field(description="The role's id.")
    name: str | None = Field(default=None, description="Its name (Viewer, Editor...).")
    permissions: list[V1Permission] = Field(
        default_factory=list, description="What it allows (each includes the roles below it)."
    )
    scope_type_mask: ScopeTypeMask | None = Field(default=None, description="Where it applies.")


class ListRolesRequest(WireRequest):
    """``v1ListRolesRequest`` and ``v1SearchRolesAssignableToScopeRequest``."""

    limit: int = Field(default=0, description="At most this many (0: all).")
    offset: int = Field(default=0, description="Skip this many.")
    workspace_id: int | None = Field(default=None, description="Roles assignable there.")


class ListRolesResponse(WireModel):
    """``v1ListRolesResponse`` and ``v1SearchRolesAssignableToScopeResponse``."""

    roles: list[V1Role] = Field(description="The roles, by id.")
    pagination: Pagination = Field(description="Where this page is.")


class V1RoleAssignment(WireModel):
    """``v1RoleAssignment``: a role and where it is given."""

    role: V1Role = Field(description="The role (its id is what counts).")
    scope_workspace_id: int | None = Field(default=None, description="The workspace.")
    scope_cluster: bool | None = Field(default=None, description="Cluster-wide (refused here).")


class UserRoleAssignment(WireModel):
    """``v1UserRoleAssignment``."""

    user_id: int = Field(description="The user.")
    role_assignment: V1RoleAssignment = Field(description="The role and its workspace.")


class GroupRoleAssignment(WireModel):
    """``v1GroupRoleAssignment``."""

    group_id: int = Field(description="The group.")
    role_assignment: V1RoleAssignment = Field(description="The role and its workspace.")


class AssignRolesRequest(WireRequest):
    """``v1AssignRolesRequest`` and ``v1RemoveAssignmentsRequest``."""

    user_role_assignments: list[UserRoleAssignment] = Field(
        default_factory=list, description="Roles given to (or taken from) users."
    )
    group_role_assignments: list[GroupRoleAssignment] = Field(
        default_factory=list, description="Roles given to (or taken from) groups."
    )


class RoleAssignmentSummary(WireModel):
    """``v1RoleAssignmentSummary``: where one role is given to a group."""

    role_id: int = Field(description="The role.")
    scope_workspace_ids: list[int] = Field(description="The workspaces.")
    scope_cluster: bool = Field(default=False, description="Never cluster-wide here.")


class GetRolesAssignedToGroupResponse(WireModel):
    """``v1GetRolesAssignedToGroupResponse``: ``roles[i]`` is given where ``assignments[i]``
    says."""

    roles: list[V1Role] = Field(description="The roles the group has somewhere.")
    assignments: list[RoleAssignmentSummary] = Field(description="Where, role by role.")


class RoleWithAssignments(WireModel):
    """``v1RoleWithAssignments``."""

    role: V1Role = Field(description="The role.")
    user_role_assignments: list[UserRoleAssignment] = Field(
        default_factory=list, description="Given to the user directly."
    )
    group_role_assignments: list[GroupRoleAssignment] = Field(
        default_factory=list, description="Given to groups the user is in."
    )


class GetRolesAssignedToUserResponse(WireModel):
    """``v1GetRolesAssignedToUserResponse``."""

    roles: list[RoleWithAssignments] = Field(description="The user's roles and where.")


class GetRolesByIdRequest(WireRequest):
    """``v1GetRolesByIDRequest`` (``det rbac describe-role``)."""

    role_ids: list[int] = Field(default_factory=list, description="The roles.")


class GetRolesByIdResponse(WireModel):
    """``v1GetRolesByIDResponse``: each role with every user and group it is given to."""

    roles: list[RoleWithAssignments] = Field(description="The roles asked for.")


class GetPermissionsSummaryResponse(WireModel):
    """``v1GetPermissionsSummaryResponse`` (``det rbac my-permissions``): the caller's role in
    each workspace they may see (cluster-wide for a cluster admin)."""

    roles: list[V1Role] = Field(description="The roles that occur in ``assignments``.")
    assignments: list[RoleAssignmentSummary] = Field(description="Where the caller has each.")


# --- workspace role assignments (Stalwart's extension) ---


class WorkspaceUserRole(WireModel):
    """One user's role in the workspace."""

    user_id: int = Field(description="The user.")
    username: str = Field(description="Their username.")
    role: str = Field(description="viewer, member, editor or admin.")


class WorkspaceGroupRole(WireModel):
    """One user group's role in the workspace."""

    group_id: int = Field(description="The group.")
    group_name: str = Field(description="Its name.")
    role: str = Field(description="viewer, member, editor or admin.")


class WorkspaceRolesResponse(WireModel):
    """A workspace's default role and its role assignments."""

    workspace_id: int = Field(description="The workspace.")
    default_role: str = Field(description="The least role every user has here.")
    assignments: list[WorkspaceUserRole] = Field(description="Assignments, by user id.")
    group_assignments: list[WorkspaceGroupRole] = Field(
        default_factory=list, description="Assignments to user groups, by group id."
    )


class SetRoleRequest(WireRequest):
    """The role to give."""

    role: str = Field(description="viewer, member, editor or admin (default: none too).")


# --- resource pool bindings ---


class PoolBindingsRequest(WireRequest):
    """``v1BindRPToWorkspaceRequest``, ``v1UnbindRPFromWorkspaceRequest``,
    ``v1OverwriteRPWorkspaceBindingsRequest``: workspaces by name and/or id."""

    resource_pool_name: str | None = Field(default=None, description="The pool (also the path).")
    workspace_ids: list[int] = Field(default_factory=list, description="Workspaces by id.")
    workspace_names: list[str] = Field(default_factory=list, description="Workspaces by name.")


class PoolBindingsResponse(WireModel):
    """``v1ListWorkspacesBoundToRPResponse``."""

    workspace_ids: list[int] = Field(description="The workspaces the pool is bound to, by id.")
    pagination: Pagination = Field(description="Where this page is.")


class AvailablePoolsResponse(WireModel):
    """``v1ListRPsBoundToWorkspaceResponse``: the pools a workspace may use."""

    resource_pools: list[str] = Field(
        default_factory=list, description="Pool names: unbound ones and those bound to it."
    )
    pagination: Pagination = Field(description="Where this page is.")
