"""Wire models of the model registry: ``v1Model``, ``v1ModelVersion`` and their requests.

``v1Model`` REQUIRED: id, name, archived, creationTime, lastUpdatedTime, metadata, numVersions,
userId, username, workspaceId. ``v1ModelVersion`` REQUIRED: id, version, model, checkpoint (a
whole ``v1Checkpoint``), creationTime, lastUpdatedTime. The official client sends a PATCH body
as the bare ``v1PatchModel`` / ``v1PatchModelVersion`` (only the keys it sets), so an absent key
(or ``null``) leaves a field alone.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.checkpoints import V1Checkpoint
from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "GetModelLabelsResponse",
    "GetModelResponse",
    "GetModelVersionResponse",
    "GetModelVersionsResponse",
    "GetModelsResponse",
    "ModelVersionMetricsResponse",
    "MoveModelRequest",
    "PatchModelRequest",
    "PatchModelVersionRequest",
    "PostModelRequest",
    "PostModelVersionRequest",
    "V1Model",
    "V1ModelVersion",
]


class V1Model(WireModel):
    """``v1Model``: a model of the registry."""

    id: int = Field(description="The model's id.")
    name: str = Field(description="Its unique name.")
    description: str = Field(default="", description="What it is.")
    notes: str = Field(default="", description="Free-form notes (a README).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="User metadata.")
    labels: list[str] = Field(default_factory=list, description="User labels.")
    creation_time: str = Field(description="When it was created (RFC 3339).")
    last_updated_time: str = Field(description="When it or its versions last changed.")
    num_versions: int = Field(description="How many versions it has.")
    user_id: int = Field(description="Who created it.")
    username: str = Field(description="Who created it.")
    workspace_id: int = Field(description="The workspace it belongs to.")
    archived: bool = Field(description="Archived models take no new versions or changes.")


class V1ModelVersion(WireModel):
    """``v1ModelVersion``: a version of a model, i.e. one registered checkpoint."""

    id: int = Field(description="The version's own id.")
    version: int = Field(description="Its number within the model, from 1.")
    model: V1Model = Field(description="The model it belongs to.")
    checkpoint: V1Checkpoint = Field(description="The registered checkpoint.")
    creation_time: str = Field(description="When it was registered (RFC 3339).")
    last_updated_time: str = Field(description="When it last changed.")
    name: str = Field(default="", description="A human-friendly name.")
    comment: str = Field(default="", description="A short comment.")
    notes: str = Field(default="", description="Free-form notes.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="User metadata.")
    labels: list[str] = Field(default_factory=list, description="User labels.")
    user_id: int | None = Field(default=None, description="Who registered it.")
    username: str | None = Field(default=None, description="Who registered it.")


class GetModelResponse(WireModel):
    """``v1GetModelResponse`` (also the answer of create and patch)."""

    model: V1Model = Field(description="The model.")


class GetModelsResponse(WireModel):
    """``v1GetModelsResponse``."""

    models: list[V1Model] = Field(default_factory=list, description="A page of models.")
    pagination: Pagination = Field(default_factory=Pagination, description="Paging.")


class GetModelVersionResponse(WireModel):
    """``v1GetModelVersionResponse`` (also the answer of register and patch)."""

    model_version: V1ModelVersion = Field(description="The version.")


class GetModelVersionsResponse(WireModel):
    """``v1GetModelVersionsResponse``."""

    model: V1Model = Field(description="The model.")
    model_versions: list[V1ModelVersion] = Field(
        default_factory=list, description="A page of its versions."
    )
    pagination: Pagination = Field(default_factory=Pagination, description="Paging.")


class GetModelLabelsResponse(WireModel):
    """``v1GetModelLabelsResponse``: labels in use, most used first."""

    labels: list[str] = Field(default_factory=list, description="The labels.")


class ModelVersionMetricsResponse(WireModel):
    """``v1GetTrialMetricsByModelVersionResponse``: metrics of trials that used a version."""

    metrics: list[dict[str, Any]] = Field(
        default_factory=list, description="Metrics reports (none: no task reports its use yet)."
    )


class PostModelRequest(WireRequest):
    """``v1PostModelRequest``: create a model (in workspace 1 unless one is named)."""

    name: str = Field(description="The unique name.")
    description: str | None = Field(default=None, description="What it is.")
    notes: str | None = Field(default=None, description="Free-form notes.")
    metadata: dict[str, Any] | None = Field(default=None, description="User metadata.")
    labels: list[str] | None = Field(default=None, description="User labels.")
    workspace_id: int | None = Field(default=None, description="Its workspace (first choice).")
    workspace_name: str | None = Field(default=None, description="Its workspace, by name.")


class PatchModelRequest(WireRequest):
    """``v1PatchModel``: the fields to change (absent or null: unchanged)."""

    name: str | None = Field(default=None, description="A new unique name.")
    description: str | None = Field(default=None, description="A new description.")
    notes: str | None = Field(default=None, description="New notes.")
    metadata: dict[str, Any] | None = Field(default=None, description="The whole new metadata.")
    labels: list[Any] | None = Field(default=None, description="The whole new label list.")
    workspace_id: int | None = Field(default=None, description="Move to this workspace.")
    workspace_name: str | None = Field(default=None, description="Move to this workspace.")


class MoveModelRequest(WireRequest):
    """``v1MoveModelRequest``."""

    model_name: str | None = Field(default=None, description="Repeats the path.")
    destination_workspace_id: int = Field(description="The workspace to move it to.")


class PostModelVersionRequest(WireRequest):
    """``v1PostModelVersionRequest``: register a checkpoint as the model's next version."""

    checkpoint_uuid: str = Field(description="The checkpoint to register (COMPLETED).")
    model_name: str | None = Field(default=None, description="Repeats the path.")
    name: str | None = Field(default=None, description="A human-friendly name.")
    comment: str | None = Field(default=None, description="A short comment.")
    notes: str | None = Field(default=None, description="Free-form notes.")
    metadata: dict[str, Any] | None = Field(default=None, description="User metadata.")
    labels: list[str] | None = Field(default=None, description="User labels.")


class PatchModelVersionRequest(WireRequest):
    """``v1PatchModelVersion``: the fields to change (absent or null: unchanged)."""

    name: str | None = Field(default=None, description="A new name.")
    comment: str | None = Field(default=None, description="A new comment.")
    notes: str | None = Field(default=None, description="New notes.")
    metadata: dict[str, Any] | None = Field(default=None, description="The whole new metadata.")
    labels: list[Any] | None = Field(default=None, description="The whole new label list.")
    checkpoint: dict[str, Any] | None = Field(
        default=None, description="Ignored: a version's checkpoint never changes."
    )
