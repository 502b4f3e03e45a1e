"""Determined's role assignments (``det rbac``) served onto Stalwart's four workspace roles.

Determined's RBAC has many roles made of permissions, given cluster-wide or in a workspace.
Stalwart has four workspace roles (:mod:`stalwart.master.policy`) and the cluster admin flag of
a user. The official client names roles by name, so the four are listed under names it knows
where one fits: ``Viewer`` (viewer), ``Member`` (member: Stalwart's own, no Determined role
matches it), ``Editor`` (editor) and ``WorkspaceAdmin`` (admin); their ids are the
:class:`~stalwart.master.policy.Role` values (1-4).

- An assignment must name a workspace: a cluster-wide one is refused with what to do instead
  (``det user edit USER --admin true`` makes a cluster admin; a workspace's default role is
  what every user has there).
- A user or group has one role per workspace: giving another replaces it. Taking a role away
  that is not the one given there is refused (404) with the one that is.
- Who may: an admin of each workspace named (or a cluster admin), as for
  :mod:`stalwart.master.services.workspace_roles`. All assignments of a request are checked
  before any is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import (
    User,
    UserGroup,
    UserGroupMember,
    Workspace,
    WorkspaceGroupRole,
    WorkspaceRole,
)
from stalwart.master.policy import Role, require_manage_workspace, workspace_role
from stalwart.master.services import workspace_roles

__all__ = [
    "PERMISSIONS",
    "ROLE_NAMES",
    "GrantTo",
    "UserRoles",
    "apply_assignments",
    "effective_roles",
    "group_roles",
    "permissions",
    "role_for_id",
    "role_holders",
    "user_roles",
]

ROLE_NAMES: dict[Role, str] = {
    Role.VIEWER: "Viewer",
    Role.MEMBER: "Member",
    Role.EDITOR: "Editor",
    Role.ADMIN: "WorkspaceAdmin",
}
"""The roles the official client lists and assigns, by the role they are."""

PERMISSIONS: dict[Role, list[tuple[str, str]]] = {
    Role.VIEWER: [
        ("PERMISSION_TYPE_VIEW_WORKSPACE", "see the workspace and its projects"),
        (
            "PERMISSION_TYPE_VIEW_EXPERIMENT_ARTIFACTS",
            "read its experiments, trials, checkpoints, logs and tasks",
        ),
    ],
    Role.MEMBER: [
        ("PERMISSION_TYPE_CREATE_EXPERIMENT", "create experiments and start tasks"),
        ("PERMISSION_TYPE_UPDATE_EXPERIMENT", "change (pause, kill, edit, delete) their own"),
    ],
    Role.EDITOR: [
        ("PERMISSION_TYPE_UPDATE_EXPERIMENT", "change every experiment of the workspace"),
    ],
    Role.ADMIN: [
        ("PERMISSION_TYPE_ASSIGN_ROLES", "give and take roles in the workspace"),
    ],
}
"""What each role adds to (or widens in) the one below it: the nearest Determined permission type
and what it means here (``det rbac list-roles`` shows them)."""


def permissions(role: Role) -> list[tuple[str, str]]:
    """Everything ``role`` allows: its own permissions and those of the roles below it (a
    higher role's wording of a permission type replaces a lower one's)."""
    found: dict[str, str] = {}
    for lower in sorted(r for r in PERMISSIONS if r <= role):
        found.update(PERMISSIONS[lower])
    return list(found.items())


def role_holders(
    session: Session, role: Role
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Who has ``role`` given to them: ``(user id, workspace id)`` and ``(group id, workspace
    id)`` pairs."""
    users = session.execute(
        select(WorkspaceRole.user_id, WorkspaceRole.workspace_id)
        .where(WorkspaceRole.role == role.label)
        .order_by(WorkspaceRole.user_id, WorkspaceRole.workspace_id)
    )
    groups = session.execute(
        select(WorkspaceGroupRole.group_id, WorkspaceGroupRole.workspace_id)
        .where(WorkspaceGroupRole.role == role.label)
        .order_by(WorkspaceGroupRole.group_id, WorkspaceGroupRole.workspace_id)
    )
    return [(u, w) for u, w in users], [(g, w) for g, w in groups]


def effective_roles(session: Session, user: User) -> dict[int, Role]:
    """``user``'s role in each workspace where it is viewer or more (their own, their groups'
    or the default: :func:`stalwart.master.policy.workspace_role`)."""
    out: dict[int, Role] = {}
    for workspace_id in session.scalars(select(Workspace.id).order_by(Workspace.id)):
        role = workspace_role(session, user, workspace_id)
        if role >= Role.VIEWER:
            out[workspace_id] = role
    return out


@dataclass(frozen=True)
class GrantTo:
    """One assignment of a request: a role for a user or a group, in a workspace."""

    role_id: int
    workspace_id: int | None
    user_id: int | None = None
    group_id: int | None = None


def _choices() -> str:
    return ", ".join(f"{name} ({role.value})" for role, name in ROLE_NAMES.items())


def role_for_id(role_id: int) -> Role:
    """The role with id ``role_id`` (InvalidArgumentError naming the four otherwise)."""
    try:
        role = Role(role_id)
    except ValueError:
        role = Role.NONE
    if role not in ROLE_NAMES:
        raise InvalidArgumentError(
            f"unknown role id {role_id}: this master's roles are {_choices()}"
        )
    return role


def _workspace(session: Session, workspace_id: int | None) -> Workspace:
    if workspace_id is None:
        raise InvalidArgumentError(
            "Stalwart gives roles in a workspace, not cluster-wide: name one (det rbac "
            "assign-role ROLE -w WORKSPACE ...); to make a cluster admin use `det user edit "
            "USER --admin true`, and a workspace's default role is what every user has there"
        )
    workspace = session.get(Workspace, workspace_id)
    if workspace is None:
        raise NotFoundError(f"workspace {workspace_id} not found")
    return workspace


def _current(session: Session, grant: GrantTo) -> tuple[str, Role | None]:
    """Who the grant is for (for messages) and their current role in its workspace."""
    if grant.group_id is not None:
        group = session.get(UserGroup, grant.group_id)
        if group is None:
            raise NotFoundError(f"user group {grant.group_id} not found")
        name = session.scalar(
            select(WorkspaceGroupRole.role).where(
                WorkspaceGroupRole.workspace_id == grant.workspace_id,
                WorkspaceGroupRole.group_id == group.id,
            )
        )
        return f"group '{group.name}'", Role[name.upper()] if name else None
    user = session.get(User, grant.user_id) if grant.user_id is not None else None
    if user is None:
        raise NotFoundError(f"user {grant.user_id} not found")
    name = session.scalar(
        select(WorkspaceRole.role).where(
            WorkspaceRole.workspace_id == grant.workspace_id, WorkspaceRole.user_id == user.id
        )
    )
    return f"user '{user.username}'", Role[name.upper()] if name else None


def apply_assignments(
    session: Session, caller: User, grants: Sequence[GrantTo], *, remove: bool
) -> None:
    """Give (or, with ``remove``, take away) every role of ``grants``; all or nothing."""
    checked: list[tuple[GrantTo, Role]] = []
    for grant in grants:
        role = role_for_id(grant.role_id)
        workspace = _workspace(session, grant.workspace_id)
        require_manage_workspace(session, caller, workspace.id)
        who, current = _current(session, grant)
        if remove and current is not role:
            has = f"its role there is {ROLE_NAMES[current]}" if current else "it has none there"
            raise NotFoundError(
                f"{who} does not have role {ROLE_NAMES[role]} in workspace '{workspace.name}' "
                f"({has})"
            )
        checked.append((grant, role))
    for grant, role in checked:
        assert grant.workspace_id is not None  # checked by _workspace
        if grant.group_id is not None:
            if remove:
                workspace_roles.remove_group_role(session, grant.workspace_id, grant.group_id)
            else:
                workspace_roles.set_group_role(
                    session, grant.workspace_id, grant.group_id, role.label
                )
        elif grant.user_id is not None:
            if remove:
                workspace_roles.remove_role(session, grant.workspace_id, grant.user_id)
            else:
                workspace_roles.set_role(session, grant.workspace_id, grant.user_id, role.label)


def group_roles(session: Session, group_id: int) -> dict[Role, list[int]]:
    """The roles given to group ``group_id``, each with its workspaces (404 if no group)."""
    if session.get(UserGroup, group_id) is None:
        raise NotFoundError(f"user group {group_id} not found")
    out: dict[Role, list[int]] = {}
    rows = session.execute(
        select(WorkspaceGroupRole.role, WorkspaceGroupRole.workspace_id)
        .where(WorkspaceGroupRole.group_id == group_id)
        .order_by(WorkspaceGroupRole.workspace_id)
    )
    for name, workspace_id in rows:
        out.setdefault(Role[name.upper()], []).append(workspace_id)
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class UserRoles:
    """Where a user has each role: given to them (workspace ids), or to their groups
    ((group id, workspace id) pairs)."""

    own: dict[Role, list[int]]
    through_groups: dict[Role, list[tuple[int, int]]]


def user_roles(session: Session, user_id: int) -> UserRoles:
    """The roles given to user ``user_id`` and to their groups (404 if no user)."""
    if session.get(User, user_id) is None:
        raise NotFoundError(f"user {user_id} not found")
    own: dict[Role, list[int]] = {}
    for name, workspace_id in session.execute(
        select(WorkspaceRole.role, WorkspaceRole.workspace_id)
        .where(WorkspaceRole.user_id == user_id)
        .order_by(WorkspaceRole.workspace_id)
    ):
        own.setdefault(Role[name.upper()], []).append(workspace_id)
    groups: dict[Role, list[tuple[int, int]]] = {}
    for name, group_id, workspace_id in session.execute(
        select(
            WorkspaceGroupRole.role, WorkspaceGroupRole.group_id, WorkspaceGroupRole.workspace_id
        )
        .join(UserGroupMember, UserGroupMember.group_id == WorkspaceGroupRole.group_id)
        .where(UserGroupMember.user_id == user_id)
        .order_by(WorkspaceGroupRole.group_id, WorkspaceGroupRole.workspace_id)
    ):
        groups.setdefault(Role[name.upper()], []).append((group_id, workspace_id))
    return UserRoles(own=own, through_groups=groups)
