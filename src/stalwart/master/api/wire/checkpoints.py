"""Wire form of a checkpoint (the models are in ``api.models.checkpoints``)."""

from __future__ import annotations

from stalwart.master.api.models.checkpoints import (
    V1Checkpoint,
    V1CheckpointTrainingMetadata,
    V1Metrics,
)
from stalwart.master.api.models.common import wire_time
from stalwart.master.redact import redact_config
from stalwart.master.services.checkpoints import CheckpointView, MetricsAt

__all__ = ["checkpoint_to_wire"]


def _metrics(at: MetricsAt | None) -> V1Metrics | None:
    if at is None:
        return None
    return V1Metrics(avg_metrics=at.avg, batch_metrics=at.batch)


def checkpoint_to_wire(view: CheckpointView) -> V1Checkpoint:
    """The wire form of a checkpoint and what is known about its training."""
    ckpt = view.checkpoint
    training = V1CheckpointTrainingMetadata()
    if view.trial_id is not None and view.experiment_config is not None:
        training = V1CheckpointTrainingMetadata(
            trial_id=view.trial_id,
            experiment_id=view.experiment_id,
            experiment_config=redact_config(view.experiment_config),
            hparams=view.hparams,
            training_metrics=_metrics(view.training),
            validation_metrics=_metrics(view.validation),
            searcher_metric=view.searcher_metric,
        )
    return V1Checkpoint(
        uuid=ckpt.uuid,
        state=f"STATE_{ckpt.state}",
        metadata=dict(ckpt.metadata_ or {}),
        resources={str(k): str(v) for k, v in (ckpt.resources or {}).items()},
        training=training,
        task_id=ckpt.task_id,
        allocation_id=ckpt.allocation_id,
        report_time=wire_time(ckpt.report_time),
        storage_id=ckpt.storage_id,
    )
