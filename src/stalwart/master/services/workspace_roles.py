"""Workspace role assignments: reading and changing them (who may is
:func:`stalwart.master.policy.require_manage_workspace`; what roles allow is in
:mod:`stalwart.master.policy`).

Assignable to a user or to a user group: ``viewer``, ``member``, ``editor``, ``admin``. A
workspace's default role (the least every user has there): ``none``, ``viewer``, ``member`` (the
default) or ``editor``. A user's role is the highest of the three (their own, their groups', the
default). Every change commits.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stalwart.errors import FailedPreconditionError, NotFoundError
from stalwart.master.db.tables import (
    User,
    UserGroup,
    Workspace,
    WorkspaceGroupRole,
    WorkspaceRole,
)
from stalwart.master.policy import DEFAULT_ROLE, Role, parse_role

__all__ = [
    "DEFAULT_ROLES",
    "USER_ROLES",
    "Assignment",
    "GroupAssignment",
    "WorkspaceRoles",
    "get_roles",
    "remove_group_role",
    "remove_role",
    "set_default_role",
    "set_group_role",
    "set_role",
]

USER_ROLES = frozenset({Role.VIEWER, Role.MEMBER, Role.EDITOR, Role.ADMIN})
"""Roles a user (or a user group) can be assigned."""
DEFAULT_ROLES = frozenset({Role.NONE, Role.VIEWER, Role.MEMBER, Role.EDITOR})
"""Roles a workspace's default can be."""


@dataclass(frozen=True)
class Assignment:
    """One user's role in a workspace."""

    user_id: int
    username: str
    role: Role


@dataclass(frozen=True)
class GroupAssignment:
    """One user group's role in a workspace."""

    group_id: int
    group_name: str
    role: Role


@dataclass(frozen=True)
class WorkspaceRoles:
    """A workspace's default role and its assignments (by user id, by group id)."""

    workspace_id: int
    default_role: Role
    assignments: list[Assignment]
    group_assignments: list[GroupAssignment]


def _workspace(session: Session, workspace_id: int) -> Workspace:
    workspace = session.get(Workspace, workspace_id)
    if workspace is None:
        raise NotFoundError(f"workspace {workspace_id} not found")
    return workspace


def get_roles(session: Session, workspace_id: int) -> WorkspaceRoles:
    """The default role and assignments of workspace ``workspace_id`` (404 if missing)."""
    workspace = _workspace(session, workspace_id)
    rows = session.execute(
        select(WorkspaceRole.user_id, User.username, WorkspaceRole.role)
        .join(User, User.id == WorkspaceRole.user_id)
        .where(WorkspaceRole.workspace_id == workspace_id)
        .order_by(WorkspaceRole.user_id)
    )
    groups = session.execute(
        select(WorkspaceGroupRole.group_id, UserGroup.name, WorkspaceGroupRole.role)
        .join(UserGroup, UserGroup.id == WorkspaceGroupRole.group_id)
        .where(WorkspaceGroupRole.workspace_id == workspace_id)
        .order_by(WorkspaceGroupRole.group_id)
    )
    default = Role[workspace.default_role.upper()] if workspace.default_role else DEFAULT_ROLE
    return WorkspaceRoles(
        workspace_id=workspace_id,
        default_role=default,
        assignments=[Assignment(uid, name, Role[role.upper()]) for uid, name, role in rows],
        group_assignments=[
            GroupAssignment(gid, name, Role[role.upper()]) for gid, name, role in groups
        ],
    )


def set_role(session: Session, workspace_id: int, user_id: int, role_name: str) -> None:
    """Give user ``user_id`` role ``role_name`` in the workspace (replacing any other)."""
    _workspace(session, workspace_id)
    role = parse_role(role_name, allowed=USER_ROLES)
    if session.get(User, user_id) is None:
        raise NotFoundError(f"user {user_id} not found")
    found = session.scalar(
        select(WorkspaceRole).where(
            WorkspaceRole.workspace_id == workspace_id, WorkspaceRole.user_id == user_id
        )
    )
    if found is None:
        session.add(WorkspaceRole(workspace_id=workspace_id, user_id=user_id, role=role.label))
    else:
        found.role = role.label
    session.commit()


def remove_role(session: Session, workspace_id: int, user_id: int) -> None:
    """Remove user ``user_id``'s assignment (their groups' roles and the default remain).
    Idempotent."""
    _workspace(session, workspace_id)
    session.execute(
        delete(WorkspaceRole).where(
            WorkspaceRole.workspace_id == workspace_id, WorkspaceRole.user_id == user_id
        )
    )
    session.commit()


def set_group_role(session: Session, workspace_id: int, group_id: int, role_name: str) -> None:
    """Give user group ``group_id`` role ``role_name`` in the workspace (replacing any other)."""
    _workspace(session, workspace_id)
    role = parse_role(role_name, allowed=USER_ROLES)
    if session.get(UserGroup, group_id) is None:
        raise NotFoundError(f"user group {group_id} not found")
    found = session.scalar(
        select(WorkspaceGroupRole).where(
            WorkspaceGroupRole.workspace_id == workspace_id,
            WorkspaceGroupRole.group_id == group_id,
        )
    )
    if found is None:
        session.add(
            WorkspaceGroupRole(workspace_id=workspace_id, group_id=group_id, role=role.label)
        )
    else:
        found.role = role.label
    session.commit()


def remove_group_role(session: Session, workspace_id: int, group_id: int) -> None:
    """Remove user group ``group_id``'s role in the workspace. Idempotent."""
    _workspace(session, workspace_id)
    session.execute(
        delete(WorkspaceGroupRole).where(
            WorkspaceGroupRole.workspace_id == workspace_id,
            WorkspaceGroupRole.group_id == group_id,
        )
    )
    session.commit()


def set_default_role(session: Session, workspace_id: int, role_name: str) -> None:
    """Set the role of users without an assignment in the workspace."""
    workspace = _workspace(session, workspace_id)
    role = parse_role(role_name, allowed=DEFAULT_ROLES)
    if workspace.immutable and role < Role.VIEWER:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' is where experiments go by default: its default role "
            "cannot be none (use viewer to stop users creating experiments there)"
        )
    workspace.default_role = None if role is DEFAULT_ROLE else role.label
    session.commit()
