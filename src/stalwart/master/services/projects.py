"""Projects: create, list, change, archive, note, move and delete them; move experiments.

Who may do what (:mod:`stalwart.master.policy`): a workspace's viewers see its projects (to
anyone else a project does not exist: NotFoundError); its members create projects there, add
notes and move their own experiments in; the project's creator (as a member) and the
workspace's editors and admins rename, describe, re-key, archive, move and delete it. The
built-in project 1 "Uncategorized" never changes, and the built-in workspace takes no new
projects. An archived project (or one in an archived workspace) takes no new experiments and
no changes. A project is deleted only while it holds no experiment.

Keys: 1-5 letters and digits, stored upper-case, unique across the cluster; one made from the
name (its first three letters or digits and random ones) when none is given. Every change
commits.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stalwart.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
)
from stalwart.master import policy
from stalwart.master.db.tables import Experiment, Project, Trial, User, Workspace, utcnow
from stalwart.master.services.workspaces import filter_owned

__all__ = [
    "KEY_LENGTH",
    "ProjectChange",
    "ProjectView",
    "add_note",
    "create_project",
    "delete_project",
    "generated_key",
    "get_project",
    "get_project_by_key",
    "list_projects",
    "move_experiment",
    "move_project",
    "patch_project",
    "set_archived",
    "set_notes",
    "view_of",
]

KEY_LENGTH = 5
_KEY = re.compile(r"^[A-Za-z0-9]{1,5}$")
_KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
MAX_NAME_LENGTH = 255
_LIVE = ("ACTIVE", "PAUSED", "STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED")


@dataclass(frozen=True)
class ProjectView:
    """A project with what the wire shows beside its row."""

    project: Project
    workspace: Workspace
    username: str
    num_experiments: int
    num_active_experiments: int
    num_runs: int
    last_experiment_started_at: dt.datetime | None

    @property
    def archived(self) -> bool:
        """Archived itself or through its workspace (as Determined reports it)."""
        return self.project.archived or self.workspace.archived


@dataclass(frozen=True)
class ProjectChange:
    """What to set on a project; fields left ``None`` stay as they are."""

    name: str | None = None
    description: str | None = None
    key: str | None = None


def view_of(session: Session, project: Project) -> ProjectView:
    """``project`` with its counts."""
    workspace = session.get(Workspace, project.workspace_id)
    assert workspace is not None  # a foreign key
    owner = session.get(User, project.user_id) if project.user_id is not None else None
    mine = Experiment.project_id == project.id
    count, last = session.execute(
        select(func.count(), func.max(Experiment.start_time)).where(mine)
    ).one()
    active = session.scalar(select(func.count()).where(mine, Experiment.state.in_(_LIVE)))
    runs = session.scalar(select(func.count()).select_from(Trial).join(Experiment).where(mine))
    return ProjectView(
        project=project,
        workspace=workspace,
        username=owner.username if owner is not None else "",
        num_experiments=int(count or 0),
        num_active_experiments=int(active or 0),
        num_runs=int(runs or 0),
        last_experiment_started_at=last,
    )


def _visible(session: Session, user: User, project_id: int) -> Project:
    project = session.get(Project, project_id)
    if project is None or policy.workspace_role(session, user, project.workspace_id) < (
        policy.Role.VIEWER
    ):
        raise NotFoundError(f"project {project_id} not found")
    return project


def get_project(session: Session, user: User, project_id: int) -> ProjectView:
    """One project; NotFoundError when unknown or not visible to ``user``."""
    return view_of(session, _visible(session, user, project_id))


def get_project_by_key(session: Session, user: User, key: str) -> ProjectView:
    """The project with key ``key`` (any case); NotFoundError as :func:`get_project`."""
    found = session.scalar(select(Project.id).where(Project.key == key.upper()))
    if found is None:
        raise NotFoundError(f"project with key '{key}' not found")
    try:
        return get_project(session, user, found)
    except NotFoundError:
        raise NotFoundError(f"project with key '{key}' not found") from None


def list_projects(
    session: Session,
    user: User,
    workspace_id: int,
    *,
    name: str | None = None,
    archived: bool | None = None,
    users: Sequence[str] = (),
    user_ids: Sequence[int] = (),
    sort_by: str = "id",
    descending: bool = False,
) -> list[ProjectView]:
    """The projects of a workspace ``user`` may see (``workspace_id`` 0: of every workspace
    they may see); ``sort_by``: id, name, description, creation_time or last_experiment."""
    query = select(Project)
    if workspace_id:
        policy.require_view_workspace(session, user, workspace_id)
        query = query.where(Project.workspace_id == workspace_id)
    if name is not None:
        query = query.where(Project.name == name)
    query = filter_owned(query, Project, archived=archived, users=users, user_ids=user_ids)
    views = [
        view_of(session, p)
        for p in session.scalars(query.order_by(Project.id))
        if policy.workspace_role(session, user, p.workspace_id) >= policy.Role.VIEWER
    ]
    floor = dt.datetime.min.replace(tzinfo=dt.UTC)
    keys: dict[str, Any] = {
        "name": lambda v: v.project.name.lower(),
        "description": lambda v: v.project.description or "",
        "creation_time": lambda v: v.project.created_at or floor,
        "last_experiment": lambda v: v.last_experiment_started_at or floor,
    }
    if sort_by in keys:
        views.sort(key=keys[sort_by], reverse=descending)
    elif descending:
        views.reverse()
    return views


def _clean_name(session: Session, workspace_id: int, name: str, other_than: int | None) -> str:
    name = name.strip()
    if not name:
        raise InvalidArgumentError("a project name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgumentError(f"a project name is at most {MAX_NAME_LENGTH} characters")
    query = select(Project.id).where(Project.workspace_id == workspace_id, Project.name == name)
    if other_than is not None:
        query = query.where(Project.id != other_than)
    if session.scalar(query) is not None:
        raise AlreadyExistsError(f"project name '{name}' is already in use in this workspace")
    return name


def _clean_key(session: Session, key: str, other_than: int | None) -> str:
    key = key.strip()
    if not _KEY.match(key):
        raise InvalidArgumentError(
            f"project key {key!r} must be 1 to {KEY_LENGTH} letters or digits"
        )
    key = key.upper()
    query = select(Project.id).where(Project.key == key)
    if other_than is not None:
        query = query.where(Project.id != other_than)
    if session.scalar(query) is not None:
        raise AlreadyExistsError(f"project key {key} is already in use")
    return key


def generated_key(session: Session, name: str) -> str:
    """A free project key made from ``name`` (its first letters, then random ones)."""
    prefix = re.sub(r"[^A-Za-z0-9]", "", name).upper()[:3]
    for _ in range(20):
        suffix = "".join(secrets.choice(_KEY_ALPHABET) for _ in range(KEY_LENGTH - len(prefix)))
        key = prefix + suffix
        if session.scalar(select(Project.id).where(Project.key == key)) is None:
            return key
    raise FailedPreconditionError(
        f"could not make a unique key for project '{name}': give one (--key)"
    )


def create_project(
    session: Session,
    user: User,
    workspace_id: int,
    name: str,
    *,
    description: str | None = None,
    key: str | None = None,
) -> ProjectView:
    """A new project of ``user`` in a workspace where they are a member or more."""
    workspace = policy.require_view_workspace(session, user, workspace_id)
    if workspace.immutable:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' is built in and takes no new projects"
        )
    if workspace.archived:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' is archived and takes no new projects"
        )
    if policy.workspace_role(session, user, workspace.id) < policy.Role.MEMBER:
        raise ForbiddenError(
            f"user {user.username} cannot create projects in workspace '{workspace.name}': a "
            "member, editor or admin role is needed (ask an admin of the workspace)"
        )
    project = Project(
        name=_clean_name(session, workspace.id, name, None),
        description=description or "",
        workspace_id=workspace.id,
        user_id=user.id,
        key=_clean_key(session, key, None) if key else generated_key(session, name),
        notes=[],
        created_at=utcnow(),
    )
    session.add(project)
    session.commit()
    return view_of(session, project)


def _changeable(session: Session, user: User, project_id: int, what: str) -> Project:
    project = _visible(session, user, project_id)
    if project.immutable:
        raise FailedPreconditionError(
            f"project '{project.name}' is built in and cannot be changed ({what})"
        )
    policy.require_change_project(session, user, project, what)
    return project


def _require_live(session: Session, project: Project, what: str) -> None:
    workspace = session.get(Workspace, project.workspace_id)
    if project.archived or (workspace is not None and workspace.archived):
        raise FailedPreconditionError(
            f"project '{project.name}' is archived (or its workspace is) and cannot {what}"
        )


def patch_project(
    session: Session, user: User, project_id: int, change: ProjectChange
) -> ProjectView:
    """Rename, describe or re-key a project."""
    project = _changeable(session, user, project_id, "change")
    _require_live(session, project, "change")
    if change.name is not None and change.name.strip() != project.name:
        project.name = _clean_name(session, project.workspace_id, change.name, project.id)
    if change.description is not None:
        project.description = change.description
    if change.key is not None and change.key.strip().upper() != (project.key or ""):
        project.key = _clean_key(session, change.key, project.id)
    session.commit()
    return view_of(session, project)


def set_archived(session: Session, user: User, project_id: int, archived: bool) -> None:
    """Archive (or unarchive) a project."""
    project = _changeable(session, user, project_id, "archive" if archived else "unarchive")
    workspace = session.get(Workspace, project.workspace_id)
    if not archived and workspace is not None and workspace.archived:
        raise FailedPreconditionError(
            f"project '{project.name}' is in archived workspace '{workspace.name}': unarchive "
            "the workspace first"
        )
    if project.archived == archived:
        state = "archived" if archived else "not archived"
        raise FailedPreconditionError(f"project '{project.name}' is already {state}")
    project.archived = archived
    session.commit()


def delete_project(session: Session, user: User, project_id: int) -> None:
    """Delete a project that holds no experiment."""
    project = _changeable(session, user, project_id, "delete")
    count = session.scalar(select(func.count()).where(Experiment.project_id == project.id))
    if count:
        raise FailedPreconditionError(
            f"project '{project.name}' holds {count} experiment(s): move them to another "
            "project (det experiment move) or delete them first"
        )
    session.delete(project)
    session.commit()


def _clean_notes(notes: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    cleaned: list[dict[str, str]] = []
    for note in notes:
        name, contents = note.get("name"), note.get("contents")
        if not isinstance(name, str) or not isinstance(contents, str):
            raise InvalidArgumentError("each note needs a name and contents (text)")
        cleaned.append({"name": name, "contents": contents})
    return cleaned


def _notes_target(session: Session, user: User, project_id: int) -> Project:
    project = _visible(session, user, project_id)
    if policy.workspace_role(session, user, project.workspace_id) < policy.Role.MEMBER:
        raise ForbiddenError(
            f"user {user.username} cannot change the notes of project '{project.name}': a "
            "member, editor or admin role in its workspace is needed"
        )
    return project


def set_notes(
    session: Session, user: User, project_id: int, notes: Sequence[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """Replace a project's notes; the notes now."""
    project = _notes_target(session, user, project_id)
    project.notes = _clean_notes(notes)
    session.commit()
    return list(project.notes)


def add_note(
    session: Session, user: User, project_id: int, note: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Append one note to a project; the notes now."""
    project = _notes_target(session, user, project_id)
    project.notes = [*project.notes, *_clean_notes([note])]
    session.commit()
    return list(project.notes)


def _destination(session: Session, user: User, project_id: int) -> Project:
    destination = _visible(session, user, project_id)
    _require_live(session, destination, "take experiments")
    policy.require_create_in_project(session, user, destination.id)
    return destination


def move_experiment(
    session: Session,
    user: User,
    experiment_id: int,
    project_id: int,
    *,
    from_project: int | None = None,
) -> None:
    """Move an experiment (that ``user`` may change) into a project (where they may create
    experiments); ``from_project``: the project it must be in."""
    experiment = session.get(Experiment, experiment_id)
    if experiment is None or (from_project is not None and experiment.project_id != from_project):
        raise NotFoundError(f"experiment {experiment_id} not found")
    policy.require_view_experiment(session, user, experiment)
    policy.require_change_experiment(session, user, experiment)
    destination = _destination(session, user, project_id)
    experiment.project_id = destination.id
    session.commit()


def move_project(session: Session, user: User, project_id: int, workspace_id: int) -> None:
    """Move a project (with its experiments) to another workspace."""
    project = _changeable(session, user, project_id, "move")
    workspace = policy.require_view_workspace(session, user, workspace_id)
    if workspace.immutable or workspace.archived:
        state = "built in" if workspace.immutable else "archived"
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' is {state} and takes no new projects"
        )
    if policy.workspace_role(session, user, workspace.id) < policy.Role.MEMBER:
        raise ForbiddenError(
            f"user {user.username} cannot move projects into workspace '{workspace.name}': a "
            "member, editor or admin role is needed there"
        )
    project.name = _clean_name(session, workspace.id, project.name, project.id)
    project.workspace_id = workspace.id
    session.commit()
