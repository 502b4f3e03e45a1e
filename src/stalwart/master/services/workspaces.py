"""Workspaces: create, list, change, archive, pin and delete them.

Who may do what (:mod:`stalwart.master.policy`): anyone creates a workspace and becomes its
admin; its viewers read it; its admins (and cluster admins) rename, archive, delete it and set
its checkpoint storage and default pools; only cluster admins set the agent user and group its
tasks run as (a uid is a node's identity, not a workspace's). Workspace 1 "Uncategorized" cannot
change. A workspace is deleted only while none of its projects holds an experiment and no task
of it is running: the refusal names what to move or delete first (its empty projects go with
it). Pins are per user. Every change commits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Select, delete, func, or_, select, update
from sqlalchemy.orm import Session

from stalwart.config.merge import merge_layers
from stalwart.config.storage import STORAGE_TYPES
from stalwart.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
)
from stalwart.master import policy
from stalwart.master.db.tables import (
    Experiment,
    Model,
    Project,
    Task,
    User,
    Workspace,
    WorkspacePin,
    WorkspaceRole,
)
from stalwart.master.services.users import AgentLink, agent_link_values

__all__ = [
    "MAX_NAME_LENGTH",
    "PoolCheck",
    "WorkspaceChange",
    "WorkspaceView",
    "checkpoint_storage_for",
    "create_workspace",
    "default_pool_for",
    "delete_workspace",
    "filter_owned",
    "get_workspace",
    "list_workspaces",
    "patch_workspace",
    "set_archived",
    "set_pinned",
    "view_of",
]

MAX_NAME_LENGTH = 255

PoolCheck = Callable[[str], None]
"""Raises InvalidArgumentError when a pool name is not one of the cluster's."""


@dataclass(frozen=True)
class WorkspaceView:
    """A workspace as one caller sees it."""

    workspace: Workspace
    owner: User | None
    num_projects: int
    num_experiments: int
    pinned_at: dt.datetime | None


@dataclass(frozen=True)
class WorkspaceChange:
    """What to set on a workspace; fields left ``None`` stay as they are. ``agent``: all four
    parts, or all None to clear; ``checkpoint_storage``: ``{}`` clears; a pool ``""`` clears."""

    name: str | None = None
    agent: AgentLink | None = None
    checkpoint_storage: Mapping[str, Any] | None = None
    default_compute_pool: str | None = None
    default_aux_pool: str | None = None


def _clean_name(session: Session, name: str, *, other_than: int | None = None) -> str:
    name = name.strip()
    if not name:
        raise InvalidArgumentError("a workspace name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgumentError(f"a workspace name is at most {MAX_NAME_LENGTH} characters")
    # the exact name too: SQLite's lower() folds ASCII only, and the unique index is exact
    query = select(Workspace.id).where(
        or_(Workspace.name == name, func.lower(Workspace.name) == name.lower())
    )
    if other_than is not None:
        query = query.where(Workspace.id != other_than)
    if session.scalar(query) is not None:
        raise AlreadyExistsError(f"workspace name '{name}' is already in use")
    return name


def _clean_storage(storage: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{}`` clears; otherwise a mapping with a known ``type`` (the rest is checked with each
    experiment's config, where it is merged)."""
    if not isinstance(storage, Mapping):
        raise InvalidArgumentError("checkpoint storage must be a mapping of settings")
    if not storage:
        return None
    kind = storage.get("type")
    if kind not in STORAGE_TYPES:
        raise InvalidArgumentError(
            f"checkpoint storage type {kind!r} is not one of {', '.join(STORAGE_TYPES)}"
        )
    return dict(storage)


def _clean_pool(pool: str, check_pool: PoolCheck | None) -> str | None:
    pool = pool.strip()
    if not pool:
        return None
    if check_pool is not None:
        check_pool(pool)
    return pool


def view_of(session: Session, user: User, workspace: Workspace) -> WorkspaceView:
    """``workspace`` with its counts and ``user``'s pin."""
    projects = select(Project.id).where(Project.workspace_id == workspace.id)
    return WorkspaceView(
        workspace=workspace,
        owner=session.get(User, workspace.user_id) if workspace.user_id is not None else None,
        num_projects=session.scalar(select(func.count()).select_from(projects.subquery())) or 0,
        num_experiments=session.scalar(
            select(func.count()).where(Experiment.project_id.in_(projects))
        )
        or 0,
        pinned_at=session.scalar(
            select(WorkspacePin.pinned_at).where(
                WorkspacePin.workspace_id == workspace.id, WorkspacePin.user_id == user.id
            )
        ),
    )


_Query = TypeVar("_Query", bound=Select[Any])


def filter_owned(
    query: _Query,
    table: type[Workspace] | type[Project],
    *,
    archived: bool | None,
    users: Sequence[str],
    user_ids: Sequence[int],
) -> _Query:
    """``query`` narrowed to rows of ``table`` (workspaces or projects) in that archive state
    (``None``: either) and owned by one of ``users`` (names) and ``user_ids`` (empty: anyone)."""
    if archived is not None:
        query = query.where(table.archived.is_(archived))
    if user_ids:
        query = query.where(table.user_id.in_(list(user_ids)))
    if users:
        query = query.where(table.user_id.in_(select(User.id).where(User.username.in_(users))))
    return query


def list_workspaces(
    session: Session,
    user: User,
    *,
    name: str | None = None,
    name_case_sensitive: str | None = None,
    archived: bool | None = None,
    pinned: bool | None = None,
    users: Sequence[str] = (),
    user_ids: Sequence[int] = (),
    sort_by_name: bool = False,
    descending: bool = False,
) -> list[WorkspaceView]:
    """The workspaces ``user`` may see (``name``: exact, case-insensitive)."""
    query = select(Workspace)
    if name is not None:
        query = query.where(func.lower(Workspace.name) == name.lower())
    if name_case_sensitive is not None:
        query = query.where(Workspace.name == name_case_sensitive)
    query = filter_owned(query, Workspace, archived=archived, users=users, user_ids=user_ids)
    key = func.lower(Workspace.name) if sort_by_name else Workspace.id
    query = query.order_by(key.desc() if descending else key.asc(), Workspace.id)
    views = [
        view_of(session, user, w)
        for w in session.scalars(query)
        if policy.workspace_role(session, user, w.id) >= policy.Role.VIEWER
    ]
    if pinned is not None:
        views = [v for v in views if (v.pinned_at is not None) == pinned]
    return views


def get_workspace(session: Session, user: User, workspace_id: int) -> WorkspaceView:
    """One workspace; NotFoundError when unknown or not visible to ``user``."""
    return view_of(session, user, policy.require_view_workspace(session, user, workspace_id))


def _apply_agent(workspace: Workspace, agent: AgentLink) -> None:
    uid, gid, user, group = agent_link_values(agent)
    workspace.agent_uid, workspace.agent_gid = uid, gid
    workspace.agent_user, workspace.agent_group = user, group


def _require_cluster_admin_for_agent(user: User) -> None:
    if not user.admin:
        raise ForbiddenError(
            f"user {user.username} cannot set the agent user and group of a workspace: only "
            "a cluster admin can (tasks of the workspace run as that OS user)"
        )


def _apply_settings(
    workspace: Workspace, user: User, change: WorkspaceChange, check_pool: PoolCheck | None
) -> None:
    """Set what ``change`` names besides the name (the agent user: cluster admins only)."""
    if change.agent is not None:
        _require_cluster_admin_for_agent(user)
        _apply_agent(workspace, change.agent)
    if change.checkpoint_storage is not None:
        workspace.checkpoint_storage = _clean_storage(change.checkpoint_storage)
    if change.default_compute_pool is not None:
        workspace.default_compute_pool = _clean_pool(change.default_compute_pool, check_pool)
    if change.default_aux_pool is not None:
        workspace.default_aux_pool = _clean_pool(change.default_aux_pool, check_pool)


def create_workspace(
    session: Session,
    user: User,
    name: str,
    change: WorkspaceChange | None = None,
    *,
    check_pool: PoolCheck | None = None,
) -> WorkspaceView:
    """A new workspace owned, administered and pinned by ``user``."""
    change = change or WorkspaceChange()
    workspace = Workspace(name=_clean_name(session, name), user_id=user.id)
    _apply_settings(workspace, user, change, check_pool)
    session.add(workspace)
    session.flush()
    session.add(WorkspaceRole(workspace_id=workspace.id, user_id=user.id, role="admin"))
    session.add(WorkspacePin(workspace_id=workspace.id, user_id=user.id))
    session.commit()
    return view_of(session, user, workspace)


def _changeable(session: Session, user: User, workspace_id: int, what: str) -> Workspace:
    workspace = policy.require_view_workspace(session, user, workspace_id)
    if workspace.immutable:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' is built in and cannot be changed ({what})"
        )
    policy.require_change_workspace(session, user, workspace, what)
    return workspace


def patch_workspace(
    session: Session,
    user: User,
    workspace_id: int,
    change: WorkspaceChange,
    *,
    check_pool: PoolCheck | None = None,
) -> WorkspaceView:
    """Rename a workspace or change its settings (see the module's rules)."""
    workspace = _changeable(session, user, workspace_id, "change")
    if change.name is not None and change.name.strip() != workspace.name:
        workspace.name = _clean_name(session, change.name, other_than=workspace.id)
    _apply_settings(workspace, user, change, check_pool)
    session.commit()
    return view_of(session, user, workspace)


def set_archived(session: Session, user: User, workspace_id: int, archived: bool) -> None:
    """Archive (or unarchive) a workspace: an archived one takes no new projects or
    experiments."""
    workspace = _changeable(session, user, workspace_id, "archive" if archived else "unarchive")
    if workspace.archived == archived:
        state = "archived" if archived else "not archived"
        raise FailedPreconditionError(f"workspace '{workspace.name}' is already {state}")
    workspace.archived = archived
    session.commit()


def set_pinned(session: Session, user: User, workspace_id: int, pinned: bool) -> None:
    """Pin (or unpin) a workspace for ``user`` (anyone who may see it); idempotent."""
    policy.require_view_workspace(session, user, workspace_id)
    mine = (WorkspacePin.workspace_id == workspace_id, WorkspacePin.user_id == user.id)
    exists = session.scalar(select(WorkspacePin.id).where(*mine))
    if pinned and exists is None:
        session.add(WorkspacePin(workspace_id=workspace_id, user_id=user.id))
    elif not pinned and exists is not None:
        session.execute(delete(WorkspacePin).where(*mine))
    session.commit()


def delete_workspace(session: Session, user: User, workspace_id: int) -> None:
    """Delete an empty workspace with its (empty) projects; refused while it holds experiments,
    models or running tasks."""
    workspace = _changeable(session, user, workspace_id, "delete")
    projects = select(Project.id).where(Project.workspace_id == workspace.id)
    experiments = session.scalar(select(func.count()).where(Experiment.project_id.in_(projects)))
    if experiments:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' holds {experiments} experiment(s): move them to "
            "another workspace (det experiment move) or delete them first"
        )
    models = session.scalar(select(func.count()).where(Model.workspace_id == workspace.id))
    if models:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' holds {models} model(s) of the model registry: move "
            "them to another workspace (det model move) or delete them first"
        )
    running = session.scalar(
        select(func.count()).where(Task.workspace_id == workspace.id, Task.end_time.is_(None))
    )
    if running:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' has {running} running task(s) (commands, notebooks, "
            "shells, TensorBoards): kill them first"
        )
    session.execute(update(Task).where(Task.workspace_id == workspace.id).values(workspace_id=None))
    session.execute(delete(Project).where(Project.workspace_id == workspace.id))
    session.execute(delete(WorkspacePin).where(WorkspacePin.workspace_id == workspace.id))
    session.execute(delete(WorkspaceRole).where(WorkspaceRole.workspace_id == workspace.id))
    session.delete(workspace)
    session.commit()


def checkpoint_storage_for(
    workspace: Workspace | None, master_default: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The checkpoint storage layer under an experiment of ``workspace``: the workspace's over
    the master's default (same ``type``: merged key by key; otherwise the workspace's whole)."""
    own = workspace.checkpoint_storage if workspace is not None else None
    if not own:
        return dict(master_default) if master_default else None
    merged = merge_layers(
        {"checkpoint_storage": dict(own)},
        {"checkpoint_storage": dict(master_default)} if master_default else None,
    )
    storage: dict[str, Any] = merged["checkpoint_storage"]
    return storage


def default_pool_for(workspace: Workspace | None, slots: int) -> str | None:
    """The pool of a job of ``workspace`` that names none: its default compute pool when it
    uses slots, its default aux pool when it uses none (None: the cluster's default)."""
    if workspace is None:
        return None
    return workspace.default_compute_pool if slots > 0 else workspace.default_aux_pool
