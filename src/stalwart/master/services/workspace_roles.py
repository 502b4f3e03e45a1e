"""Workspace role assignments: reading and changing them (who may is
:func:`stalwart.master.policy.require_manage_workspace`; what roles allow is in
:mod:`stalwart.master.policy`).

Assignable to a user: ``viewer``, ``member``, ``editor``, ``admin``. A workspace's default role
(users without an assignment): ``none``, ``viewer``, ``member`` (the default) or ``editor``.
Every change commits.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stalwart.errors import FailedPreconditionError, NotFoundError
from stalwart.master.db.tables import User, Workspace, WorkspaceRole
from stalwart.master.policy import DEFAULT_ROLE, Role, parse_role

__all__ = [
    "DEFAULT_ROLES",
    "USER_ROLES",
    "Assignment",
    "WorkspaceRoles",
    "get_roles",
    "remove_role",
    "set_default_role",
    "set_role",
]

USER_ROLES = frozenset({Role.VIEWER, Role.MEMBER, Role.EDITOR, Role.ADMIN})
"""Roles a user can be assigned."""
DEFAULT_ROLES = frozenset({Role.NONE, Role.VIEWER, Role.MEMBER, Role.EDITOR})
"""Roles a workspace's default can be."""


@dataclass(frozen=True)
class Assignment:
    """One user's role in a workspace."""

    user_id: int
    username: str
    role: Role


@dataclass(frozen=True)
class WorkspaceRoles:
    """A workspace's default role and its assignments (by user id)."""

    workspace_id: int
    default_role: Role
    assignments: list[Assignment]


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
    default = Role[workspace.default_role.upper()] if workspace.default_role else DEFAULT_ROLE
    return WorkspaceRoles(
        workspace_id=workspace_id,
        default_role=default,
        assignments=[Assignment(uid, name, Role[role.upper()]) for uid, name, role in rows],
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
    """Remove user ``user_id``'s assignment (they get the default role). Idempotent."""
    _workspace(session, workspace_id)
    session.execute(
        delete(WorkspaceRole).where(
            WorkspaceRole.workspace_id == workspace_id, WorkspaceRole.user_id == user_id
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
