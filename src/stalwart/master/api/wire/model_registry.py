"""Wire form of models and model versions (the models are in ``api.models.model_registry``).

A version carries its whole checkpoint (``v1Checkpoint`` with its training facts, the
experiment config redacted), so that the official SDK can download it through
``version.checkpoint``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.model_registry import V1Model, V1ModelVersion
from stalwart.master.api.wire.checkpoints import checkpoint_to_wire
from stalwart.master.db.tables import Checkpoint, Model, ModelVersion, User
from stalwart.master.services.checkpoints import build_views
from stalwart.master.services.models import version_counts

__all__ = ["models_to_wire", "versions_to_wire"]


def _usernames(session: Session, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows = session.execute(select(User.id, User.username).where(User.id.in_(sorted(ids))))
    return {int(uid): str(name) for uid, name in rows}


def models_to_wire(session: Session, models: Sequence[Model]) -> list[V1Model]:
    """The wire form of ``models``, in order (version counts and owners read in one go)."""
    counts = version_counts(session, [m.id for m in models])
    names = _usernames(session, {m.user_id for m in models})
    return [
        V1Model(
            id=m.id,
            name=m.name,
            description=m.description or "",
            notes=m.notes or "",
            metadata=dict(m.metadata_ or {}),
            labels=list(m.labels or []),
            creation_time=wire_time(m.creation_time) or "",
            last_updated_time=wire_time(m.last_updated_time) or "",
            num_versions=counts.get(m.id, 0),
            user_id=m.user_id,
            username=names.get(m.user_id, ""),
            workspace_id=m.workspace_id,
            archived=m.archived,
        )
        for m in models
    ]


def versions_to_wire(
    session: Session, model: Model, versions: Sequence[ModelVersion]
) -> list[V1ModelVersion]:
    """The wire form of ``model``'s ``versions``, in order, each with its checkpoint."""
    (wire_model,) = models_to_wire(session, [model])
    uuids = sorted({v.checkpoint_uuid for v in versions})
    ckpts = list(session.scalars(select(Checkpoint).where(Checkpoint.uuid.in_(uuids))))
    views = {view.checkpoint.uuid: checkpoint_to_wire(view) for view in build_views(session, ckpts)}
    names = _usernames(session, {v.user_id for v in versions})
    return [
        V1ModelVersion(
            id=v.id,
            version=v.version,
            model=wire_model,
            checkpoint=views[v.checkpoint_uuid],
            creation_time=wire_time(v.creation_time) or "",
            last_updated_time=wire_time(v.last_updated_time) or "",
            name=v.name or "",
            comment=v.comment or "",
            notes=v.notes or "",
            metadata=dict(v.metadata_ or {}),
            labels=list(v.labels or []),
            user_id=v.user_id,
            username=names.get(v.user_id, ""),
        )
        for v in versions
    ]
