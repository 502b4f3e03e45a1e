"""Wire models of checkpoints (wire doc 4.3 and 5.5).

``v1Checkpoint`` REQUIRED: ``uuid``, ``state`` (never STATE_UNSPECIFIED), ``metadata``,
``resources`` (path -> size as a decimal string) and ``training``. When ``training.trialId`` is
set, ``experimentId`` and ``experimentConfig`` are set too (the SDK asserts it).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "CheckpointsResponse",
    "DeleteCheckpointsRequest",
    "GetCheckpointResponse",
    "PatchCheckpoint",
    "PatchCheckpointResources",
    "PatchCheckpointsRequest",
    "PostCheckpointMetadataRequest",
    "ReportCheckpointRequest",
    "V1Checkpoint",
    "V1CheckpointTrainingMetadata",
    "V1Metrics",
]


class V1Metrics(WireModel):
    """``v1Metrics``: REQUIRED avgMetrics."""

    avg_metrics: dict[str, Any] = Field(default_factory=dict, description="Averaged metrics.")
    batch_metrics: list[dict[str, Any]] | None = Field(
        default=None, description="Per-batch metrics, when reported."
    )


class V1CheckpointTrainingMetadata(WireModel):
    """``v1CheckpointTrainingMetadata`` (all optional)."""

    trial_id: int | None = Field(default=None, description="The trial that saved it.")
    experiment_id: int | None = Field(default=None, description="Its experiment.")
    experiment_config: dict[str, Any] | None = Field(
        default=None, description="The experiment's fully defaulted config."
    )
    hparams: dict[str, Any] | None = Field(default=None, description="The trial's hparams.")
    training_metrics: V1Metrics | None = Field(
        default=None, description="Training metrics reported at the checkpoint's step."
    )
    validation_metrics: V1Metrics | None = Field(
        default=None, description="Validation metrics reported at the checkpoint's step."
    )
    searcher_metric: float | None = Field(
        default=None, description="The searcher metric among the validation metrics."
    )


class V1Checkpoint(WireModel):
    """``v1Checkpoint``; every field without a default is REQUIRED by the official client."""

    uuid: str = Field(description="Checkpoint UUID (its directory in storage).")
    state: str = Field(description="checkpointv1State, e.g. STATE_COMPLETED.")
    metadata: dict[str, Any] = Field(description="User metadata; has steps_completed.")
    resources: dict[str, str] = Field(description="File path -> size in bytes (int64 string).")
    training: V1CheckpointTrainingMetadata = Field(description="Training metadata.")
    task_id: str | None = Field(default=None, description="The task that saved it.")
    allocation_id: str | None = Field(default=None, description="The allocation that saved it.")
    report_time: str | None = Field(default=None, description="When it was reported.")
    storage_id: int | None = Field(default=None, description="Its checkpoint storage.")


class GetCheckpointResponse(WireModel):
    checkpoint: V1Checkpoint = Field(description="The checkpoint.")


class CheckpointsResponse(WireModel):
    """Experiment and trial checkpoint lists."""

    checkpoints: list[V1Checkpoint] = Field(default_factory=list, description="A page of them.")
    pagination: Pagination = Field(default_factory=Pagination, description="Pagination.")


class ReportCheckpointRequest(WireRequest):
    """``POST /api/v1/checkpoints`` body: a ``v1Checkpoint`` as the harness sends it."""

    uuid: str = Field(min_length=1, description="Checkpoint UUID.")
    state: str | None = Field(default=None, description="STATE_COMPLETED (the harness).")
    metadata: dict[str, Any] | None = Field(default=None, description="Needs steps_completed.")
    resources: dict[str, int | str] | None = Field(default=None, description="Path -> size.")
    training: dict[str, Any] | None = Field(default=None, description="Ignored (derived).")
    task_id: str | None = Field(default=None, description="Reporting task.")
    allocation_id: str | None = Field(default=None, description="Reporting allocation.")
    report_time: str | None = Field(default=None, description="RFC 3339.")
    storage_id: int | None = Field(default=None, description="From runs/start.")


class DeleteCheckpointsRequest(WireRequest):
    checkpoint_uuids: list[str] = Field(default_factory=list, description="What to delete.")


class PatchCheckpointResources(WireRequest):
    """``PatchCheckpointOptionalResources``: the files left after a (partial) deletion."""

    resources: dict[str, int | str] | None = Field(default=None, description="Path -> size.")


class PatchCheckpoint(WireRequest):
    uuid: str = Field(description="Checkpoint UUID.")
    resources: PatchCheckpointResources | None = Field(
        default=None, description="Remaining files; empty means all deleted."
    )


class PatchCheckpointsRequest(WireRequest):
    checkpoints: list[PatchCheckpoint] = Field(default_factory=list, description="Updates.")


class CheckpointMetadataBody(WireRequest):
    uuid: str | None = Field(default=None, description="Repeats the path.")
    metadata: dict[str, Any] | None = Field(default=None, description="The new metadata.")


class PostCheckpointMetadataRequest(WireRequest):
    checkpoint: CheckpointMetadataBody = Field(description="Carries the new metadata.")
