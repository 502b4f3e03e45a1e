"""The model registry: models (named series of versions in a workspace) and their versions
(registered checkpoints).

Contracts:

- A model is named in a path by its name or, when the segment is only digits, by its id; names
  are unique (case-sensitive), never blank, only digits, slashed or with double spaces
  (InvalidArgumentError). A model the caller cannot see (no role in its workspace) is answered
  as not found, so its name does not leak. Who may change what is
  :mod:`stalwart.master.policy`'s rule (viewers read, members create and change their own,
  editors change all).
- An archived model refuses changes and new versions (FailedPreconditionError) until it is
  unarchived; moving it to another workspace stays possible.
- Registering needs a COMPLETED checkpoint the caller may see; versions are numbered from 1 per
  model and a deleted version's number is never handed out again. Registering locks the
  checkpoint's row, as checkpoint GC does before marking one DELETED, so a checkpoint is never
  both registered and collected.
- While any version names a checkpoint, it is kept: checkpoint GC leaves it alone, and deleting
  it (or the experiment it belongs to) is refused with a message naming the model
  (:func:`refuse_registered`). Deleting a model deletes its versions, which frees their
  checkpoints for later deletion (not for an experiment's GC that already ran).
- Every function flushes; the caller commits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from stalwart.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from stalwart.master import policy
from stalwart.master.db.tables import (
    Checkpoint,
    Experiment,
    Model,
    ModelVersion,
    Task,
    User,
    Workspace,
    utcnow,
)

__all__ = [
    "MODEL_SORT_KEYS",
    "ModelFilters",
    "ModelPatch",
    "VersionFields",
    "archive_model",
    "create_model",
    "delete_model",
    "delete_version",
    "find_model",
    "get_version",
    "label_counts",
    "list_models",
    "list_versions",
    "move_model",
    "patch_model",
    "patch_version",
    "refuse_experiment_delete",
    "refuse_registered",
    "register_version",
    "registered_checkpoints",
    "version_counts",
]

_DIGITS = re.compile(r"^\d+$")

MODEL_SORT_KEYS = (
    "SORT_BY_UNSPECIFIED",
    "SORT_BY_NAME",
    "SORT_BY_DESCRIPTION",
    "SORT_BY_CREATION_TIME",
    "SORT_BY_LAST_UPDATED_TIME",
    "SORT_BY_NUM_VERSIONS",
    "SORT_BY_WORKSPACE",
)


@dataclass(frozen=True)
class ModelFilters:
    """``GET /api/v1/models`` filters (None / empty: no filter)."""

    model_id: int | None = None
    name: str | None = None
    """A part of the name, case-insensitive."""
    description: str | None = None
    archived: bool | None = None
    labels: Sequence[str] = ()
    """Models with any of these labels."""
    users: Sequence[str] = ()
    user_ids: Sequence[int] = ()
    workspace_ids: Sequence[int] | None = None
    workspace_names: Sequence[str] | None = None


@dataclass(frozen=True)
class ModelPatch:
    """What ``PATCH /api/v1/models/{model}`` changes (None: unchanged)."""

    name: str | None = None
    description: str | None = None
    notes: str | None = None
    metadata: Mapping[str, Any] | None = None
    labels: Sequence[Any] | None = None
    workspace_id: int | None = None
    workspace_name: str | None = None


@dataclass(frozen=True)
class VersionFields:
    """A version's own fields (None: unset on registering, unchanged on a patch)."""

    name: str | None = None
    comment: str | None = None
    notes: str | None = None
    metadata: Mapping[str, Any] | None = None
    labels: Sequence[Any] | None = None


# --- names, labels, workspaces ---


def _check_name(name: str) -> str:
    if not name.replace(" ", ""):
        raise InvalidArgumentError("model names cannot be blank")
    if "  " in name:
        raise InvalidArgumentError("model names cannot have excessive spacing")
    if "/" in name or "\\" in name:
        raise InvalidArgumentError("model names cannot have slashes")
    if _DIGITS.match(name):
        raise InvalidArgumentError(
            "model names cannot be only numbers (a number names a model by its id)"
        )
    if len(name) > 255:
        raise InvalidArgumentError("model names are at most 255 characters")
    return name


def _labels(values: Iterable[Any]) -> list[str]:
    """Strings only, each once, in the given order."""
    return list(dict.fromkeys(v for v in values if isinstance(v, str)))


def _name_taken(session: Session, name: str, *, other_than: int | None = None) -> None:
    found = session.scalar(select(Model.id).where(Model.name == name))
    if found is not None and found != other_than:
        raise AlreadyExistsError(f"a model named {name!r} already exists: choose another name")


def _flush_name(session: Session, name: str) -> None:
    """Flush; a name taken meanwhile by another request is AlreadyExistsError, not a 500."""
    try:
        session.flush()
    except IntegrityError as exc:
        session.rollback()
        raise AlreadyExistsError(
            f"a model named {name!r} already exists: choose another name"
        ) from exc


def _workspace(
    session: Session, user: User, *, workspace_id: int | None, workspace_name: str | None
) -> Workspace:
    """The named workspace, if the caller may see it (NotFoundError otherwise)."""
    if workspace_id is not None:
        workspace = session.get(Workspace, workspace_id)
        shown = str(workspace_id)
    else:
        name = workspace_name or ""
        workspace = session.scalar(select(Workspace).where(Workspace.name == name))
        shown = repr(name)
    if workspace is None or policy.workspace_role(session, user, workspace.id) < (
        policy.Role.VIEWER
    ):
        raise NotFoundError(f"workspace {shown} not found")
    return workspace


# --- models ---


def find_model(session: Session, user: User, identifier: str | int) -> Model:
    """The model named ``identifier`` (a name, or digits: an id) that ``user`` may see."""
    text = str(identifier)
    if _DIGITS.match(text):
        model = session.get(Model, int(text))
    else:
        model = session.scalar(select(Model).where(Model.name == text))
    if model is None or not policy.sees_model(session, user, model):
        raise NotFoundError(f"model {text!r} not found")
    return model


def version_counts(session: Session, model_ids: Sequence[int]) -> dict[int, int]:
    """Model id -> number of versions."""
    if not model_ids:
        return {}
    rows = session.execute(
        select(ModelVersion.model_id, func.count())
        .where(ModelVersion.model_id.in_(list(model_ids)))
        .group_by(ModelVersion.model_id)
    )
    return {int(mid): int(n) for mid, n in rows}


def _visible_workspaces(session: Session, user: User) -> set[int]:
    return {
        ws_id
        for ws_id in session.scalars(select(Workspace.id))
        if policy.workspace_role(session, user, ws_id) >= policy.Role.VIEWER
    }


def list_models(
    session: Session,
    user: User,
    filters: ModelFilters,
    *,
    sort_by: str | None = None,
    order_by: str | None = None,
) -> list[Model]:
    """The models ``user`` may see that match ``filters``, sorted (ties by id)."""
    sort_key = sort_by or "SORT_BY_UNSPECIFIED"
    if sort_key not in MODEL_SORT_KEYS:
        raise InvalidArgumentError(f"unsupported sortBy {sort_by}")
    if order_by not in (None, "", "ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise InvalidArgumentError(f"unsupported orderBy {order_by}")
    workspaces = _visible_workspaces(session, user)
    if filters.workspace_ids is not None:
        workspaces &= set(filters.workspace_ids)
    elif filters.workspace_names is not None:
        named = session.scalars(
            select(Workspace.id).where(Workspace.name.in_(list(filters.workspace_names)))
        )
        workspaces &= set(named)
    query = select(Model).where(Model.workspace_id.in_(sorted(workspaces)))
    if filters.model_id:
        query = query.where(Model.id == filters.model_id)
    if filters.archived is not None:
        query = query.where(Model.archived.is_(filters.archived))
    if filters.name:
        query = query.where(func.lower(Model.name).contains(filters.name.lower(), autoescape=True))
    if filters.description:
        query = query.where(
            func.lower(Model.description).contains(filters.description.lower(), autoescape=True)
        )
    if filters.users or filters.user_ids:
        ids = set(filters.user_ids)
        if filters.users:
            ids |= set(session.scalars(select(User.id).where(User.username.in_(filters.users))))
        query = query.where(Model.user_id.in_(sorted(ids)))
    models = list(session.scalars(query))
    if filters.labels:
        wanted = set(filters.labels)
        models = [m for m in models if wanted & set(m.labels or [])]
    counts = version_counts(session, [m.id for m in models])
    names = {
        int(ws_id): str(name)
        for ws_id, name in session.execute(select(Workspace.id, Workspace.name))
    }

    def key(model: Model) -> Any:
        if sort_key == "SORT_BY_NAME":
            return model.name
        if sort_key == "SORT_BY_DESCRIPTION":
            return model.description or ""
        if sort_key == "SORT_BY_CREATION_TIME":
            return model.creation_time
        if sort_key == "SORT_BY_LAST_UPDATED_TIME":
            return model.last_updated_time
        if sort_key == "SORT_BY_NUM_VERSIONS":
            return counts.get(model.id, 0)
        if sort_key == "SORT_BY_WORKSPACE":
            return names.get(model.workspace_id, "")
        return 0

    descending = order_by == "ORDER_BY_DESC"
    return sorted(models, key=lambda m: (key(m), m.id), reverse=descending)


def create_model(
    session: Session,
    user: User,
    name: str,
    *,
    description: str | None = None,
    notes: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    labels: Sequence[Any] | None = None,
    workspace_id: int | None = None,
    workspace_name: str | None = None,
) -> Model:
    """A new model in the named workspace (workspace 1 when none is named)."""
    _check_name(name)
    if workspace_id is None and workspace_name is None:
        workspace_id = 1
    workspace = _workspace(session, user, workspace_id=workspace_id, workspace_name=workspace_name)
    if workspace.archived:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' is archived: unarchive it to create models in it"
        )
    policy.require_create_model(session, user, workspace.id)
    _name_taken(session, name)
    model = Model(
        name=name,
        description=description or "",
        notes=notes or "",
        metadata_=dict(metadata or {}),
        labels=_labels(labels or []),
        user_id=user.id,
        workspace_id=workspace.id,
        archived=False,
        last_version=0,
    )
    session.add(model)
    _flush_name(session, name)
    return model


def _not_archived(model: Model, what: str) -> None:
    if model.archived:
        raise FailedPreconditionError(
            f"model '{model.name}' is archived and cannot {what} (unarchive it first)"
        )


def _move_target(session: Session, user: User, model: Model, workspace: Workspace) -> None:
    if workspace.id == model.workspace_id:
        return
    if workspace.archived:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' is archived: models cannot move into it"
        )
    policy.require_create_model(session, user, workspace.id)


def patch_model(session: Session, user: User, model: Model, patch: ModelPatch) -> Model:
    """Change a model's fields (a whole new ``metadata`` / ``labels``; a workspace moves it)."""
    _not_archived(model, "have attributes updated")
    policy.require_change_model(session, user, model)
    if patch.name is not None and patch.name != model.name:
        _check_name(patch.name)
        _name_taken(session, patch.name, other_than=model.id)
        model.name = patch.name
    if patch.description is not None:
        model.description = patch.description
    if patch.notes is not None:
        model.notes = patch.notes
    if patch.metadata is not None:
        model.metadata_ = dict(patch.metadata)
    if patch.labels is not None:
        model.labels = _labels(patch.labels)
    if patch.workspace_id is not None or patch.workspace_name is not None:
        target = _workspace(
            session, user, workspace_id=patch.workspace_id, workspace_name=patch.workspace_name
        )
        _move_target(session, user, model, target)
        model.workspace_id = target.id
    model.last_updated_time = utcnow()
    _flush_name(session, model.name)
    return model


def archive_model(session: Session, user: User, model: Model, *, archived: bool) -> Model:
    """Archive or unarchive a model (idempotent)."""
    policy.require_change_model(session, user, model)
    if model.archived != archived:
        model.archived = archived
        model.last_updated_time = utcnow()
    session.flush()
    return model


def move_model(session: Session, user: User, model: Model, workspace_id: int) -> Model:
    """Move a model (with its versions) to another workspace."""
    policy.require_change_model(session, user, model)
    target = _workspace(session, user, workspace_id=workspace_id, workspace_name=None)
    _move_target(session, user, model, target)
    if model.workspace_id != target.id:
        model.workspace_id = target.id
        model.last_updated_time = utcnow()
    session.flush()
    return model


def delete_model(session: Session, user: User, model: Model) -> None:
    """Delete a model and its versions (their checkpoints are no longer kept for it)."""
    policy.require_change_model(session, user, model)
    session.execute(delete(ModelVersion).where(ModelVersion.model_id == model.id))
    session.delete(model)
    session.flush()


# --- versions ---


def _require_view_checkpoint(session: Session, user: User, ckpt: Checkpoint) -> None:
    if ckpt.experiment_id is not None:
        experiment = session.get(Experiment, ckpt.experiment_id)
        if experiment is not None:
            policy.require_view_experiment(session, user, experiment)
        return
    task = session.get(Task, ckpt.task_id) if ckpt.task_id is not None else None
    if task is None or user.admin or task.owner_id == user.id:
        return
    if task.workspace_id is None or (
        policy.workspace_role(session, user, task.workspace_id) < policy.Role.VIEWER
    ):
        raise NotFoundError(f"checkpoint {ckpt.uuid} not found")


def register_version(
    session: Session, user: User, model: Model, checkpoint_uuid: str, fields: VersionFields
) -> ModelVersion:
    """Register a COMPLETED checkpoint as the model's next version."""
    policy.require_change_model(session, user, model)
    _not_archived(model, "register new versions")
    # Lock the checkpoint (and the model, for its version counter): checkpoint GC takes the
    # same row lock before it marks a checkpoint DELETED (PostgreSQL; SQLite has one writer).
    ckpt = session.scalar(
        select(Checkpoint)
        .where(Checkpoint.uuid == checkpoint_uuid)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if ckpt is None:
        raise NotFoundError(f"checkpoint {checkpoint_uuid} not found")
    _require_view_checkpoint(session, user, ckpt)
    if ckpt.state != "COMPLETED":
        raise FailedPreconditionError(
            f"checkpoint {ckpt.uuid} is in STATE_{ckpt.state} state: checkpoints for model "
            "versions must be in a COMPLETED state"
        )
    locked = session.scalar(
        select(Model)
        .where(Model.id == model.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    assert locked is not None
    locked.last_version = (locked.last_version or 0) + 1
    now = utcnow()
    version = ModelVersion(
        model_id=locked.id,
        version=locked.last_version,
        checkpoint_uuid=ckpt.uuid,
        name=fields.name or "",
        comment=fields.comment or "",
        notes=fields.notes or "",
        metadata_=dict(fields.metadata or {}),
        labels=_labels(fields.labels or []),
        user_id=user.id,
        creation_time=now,
        last_updated_time=now,
    )
    locked.last_updated_time = now
    session.add(version)
    session.flush()
    return version


def get_version(session: Session, model: Model, number: int, *, shown: str) -> ModelVersion:
    """Version ``number`` of ``model`` (NotFoundError naming ``shown``, the model as asked)."""
    version = session.scalar(
        select(ModelVersion).where(
            ModelVersion.model_id == model.id, ModelVersion.version == number
        )
    )
    if version is None:
        raise NotFoundError(f"version {number} for model {shown!r} not found")
    return version


def list_versions(
    session: Session, model: Model, *, sort_by: str | None = None, order_by: str | None = None
) -> list[ModelVersion]:
    """A model's versions by number (or registration time), ascending unless ORDER_BY_DESC."""
    if sort_by not in (None, "", "SORT_BY_UNSPECIFIED", "SORT_BY_VERSION", "SORT_BY_CREATION_TIME"):
        raise InvalidArgumentError(f"unsupported sortBy {sort_by}")
    versions = list(session.scalars(select(ModelVersion).where(ModelVersion.model_id == model.id)))
    if sort_by == "SORT_BY_CREATION_TIME":
        versions.sort(key=lambda v: (v.creation_time, v.version))
    else:
        versions.sort(key=lambda v: v.version)
    if order_by == "ORDER_BY_DESC":
        versions.reverse()
    return versions


def patch_version(
    session: Session, user: User, model: Model, version: ModelVersion, fields: VersionFields
) -> ModelVersion:
    """Change a version's name, comment, notes, metadata or labels."""
    policy.require_change_model(session, user, model)
    if fields.name is not None:
        version.name = fields.name
    if fields.comment is not None:
        version.comment = fields.comment
    if fields.notes is not None:
        version.notes = fields.notes
    if fields.metadata is not None:
        version.metadata_ = dict(fields.metadata)
    if fields.labels is not None:
        version.labels = _labels(fields.labels)
    version.last_updated_time = utcnow()
    session.flush()
    return version


def delete_version(session: Session, user: User, model: Model, version: ModelVersion) -> None:
    """Delete a version (its checkpoint is no longer kept for it)."""
    policy.require_delete_model_version(session, user, model, version)
    session.delete(version)
    model.last_updated_time = utcnow()
    session.flush()


def label_counts(session: Session, user: User, workspace_id: int | None = None) -> list[str]:
    """Labels of the models ``user`` may see (of one workspace when given), most used first,
    then by name."""
    workspaces = _visible_workspaces(session, user)
    if workspace_id:
        workspaces &= {workspace_id}
    counts: dict[str, int] = {}
    for labels in session.scalars(
        select(Model.labels).where(Model.workspace_id.in_(sorted(workspaces)))
    ):
        for label in set(labels or []):
            counts[label] = counts.get(label, 0) + 1
    return sorted(counts, key=lambda label: (-counts[label], label))


# --- what the registry keeps ---


def registered_checkpoints(
    session: Session, uuids: Iterable[str]
) -> dict[str, list[tuple[Model, ModelVersion]]]:
    """Checkpoint uuid -> the model versions that name it (only registered ones appear)."""
    wanted = sorted(set(uuids))
    found: dict[str, list[tuple[Model, ModelVersion]]] = {}
    for start in range(0, len(wanted), 500):
        rows = session.execute(
            select(Model, ModelVersion)
            .join(ModelVersion, ModelVersion.model_id == Model.id)
            .where(ModelVersion.checkpoint_uuid.in_(wanted[start : start + 500]))
            .order_by(Model.id, ModelVersion.version)
        )
        for model, version in rows:
            found.setdefault(version.checkpoint_uuid, []).append((model, version))
    return found


def refuse_registered(session: Session, user: User, uuids: Iterable[str], action: str) -> None:
    """InvalidArgumentError naming the models of any of ``uuids`` that is registered
    (``action``: "deleted", ...); models the caller cannot see are not named."""
    wanted = sorted(set(uuids))
    # Lock the rows (in a stable order) as registering does, so a registration running at the
    # same time either is seen here or finds the checkpoint DELETED (PostgreSQL).
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        session.execute(select(Checkpoint.uuid).where(Checkpoint.uuid.in_(chunk)).with_for_update())
    registered = registered_checkpoints(session, wanted)
    if not registered:
        return
    parts = []
    for uuid, pairs in sorted(registered.items()):
        model, version = pairs[0]
        if policy.sees_model(session, user, model):
            parts.append(
                f"{uuid}, registered to {model.name} (model #{model.id}), version {version.version}"
            )
        else:
            parts.append(f"{uuid}, registered to a model you cannot see")
    raise InvalidArgumentError(
        f"these checkpoints are in the model registry and cannot be {action}: "
        f"{'; '.join(parts)} (delete those model versions first)"
    )


def refuse_experiment_delete(session: Session, user: User, experiment_id: int) -> None:
    """InvalidArgumentError when checkpoints of the experiment are registered (deleting the
    experiment would delete them)."""
    uuids = list(
        session.scalars(select(Checkpoint.uuid).where(Checkpoint.experiment_id == experiment_id))
    )
    try:
        refuse_registered(session, user, uuids, "deleted")
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(
            f"experiment {experiment_id} cannot be deleted: its checkpoints are registered as "
            f"model versions. {exc.message}"
        ) from exc
