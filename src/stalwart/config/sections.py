"""Small experiment-config sections: lengths, bind mounts, reproducibility, profiling and
optimizations.

Contract: field names, bounds and defaults are Determined 0.38's expconf v0, so that validating a
merged config yields Determined's defaulted values. Values Determined fills in from elsewhere
(the experiment seed) stay ``None`` here and are filled by :mod:`stalwart.config.merge`. Fields
Stalwart accepts but does not act on say so in their description. The remaining sections live in
:mod:`stalwart.config.integrations` and :mod:`stalwart.config.legacy`.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator
from pydantic_core import PydanticCustomError

from stalwart.config.base import ConfigModel

__all__ = [
    "LENGTH_UNITS",
    "BindMount",
    "Length",
    "OptimizationsConfig",
    "PositiveLength",
    "ProfilingConfig",
    "ReproducibilityConfig",
]

LENGTH_UNITS = ("batches", "records", "epochs")
"""The units a :class:`Length` can be given in."""


class Length(ConfigModel):
    """A training length in exactly one unit: ``{batches: n}``, ``{records: n}`` or ``{epochs: n}``.

    Used by ``min_validation_period``, ``min_checkpoint_period`` and the searcher. Determined's
    rule: a length in ``epochs`` needs the top-level ``records_per_epoch`` (checked with the whole
    config, not here). Serialized with its single key only.
    """

    batches: int | None = Field(default=None, ge=0, description="Length in batches.")
    records: int | None = Field(default=None, ge=0, description="Length in records (samples).")
    epochs: int | None = Field(
        default=None,
        ge=0,
        description="Length in epochs; needs the top-level `records_per_epoch`.",
    )

    @model_validator(mode="after")
    def _exactly_one_unit(self) -> Self:
        if sum(v is not None for v in (self.batches, self.records, self.epochs)) != 1:
            raise PydanticCustomError(
                "length_units",
                'a length object must have one attribute named "batches", "records", or "epochs"',
            )
        return self

    @model_serializer(mode="wrap")
    def _only_the_set_unit(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None}

    @property
    def unit(self) -> Literal["batches", "records", "epochs"]:
        """The unit this length is given in."""
        if self.batches is not None:
            return "batches"
        return "records" if self.records is not None else "epochs"

    @property
    def value(self) -> int:
        """The number of units."""
        return next(v for v in (self.batches, self.records, self.epochs) if v is not None)


class PositiveLength(Length):
    """A :class:`Length` of at least one unit (Determined's rule for searcher lengths)."""

    batches: int | None = Field(default=None, ge=1, description="Length in batches.")
    records: int | None = Field(default=None, ge=1, description="Length in records (samples).")
    epochs: int | None = Field(
        default=None,
        ge=1,
        description="Length in epochs; needs the top-level `records_per_epoch`.",
    )


class BindMount(ConfigModel):
    """A host directory mounted into the task container (or visible to a process task)."""

    host_path: str = Field(description="Absolute path on the host.")
    container_path: str = Field(
        description="Path inside the container (relative paths are relative to the working "
        "directory)."
    )
    read_only: bool = Field(default=False, description="Mount read-only.")
    propagation: str = Field(
        default="rprivate",
        description="Mount propagation (`rprivate`, `rshared`, `rslave`, ...); meaningful only "
        "where tasks run in containers.",
    )

    @model_validator(mode="after")
    def _paths(self) -> Self:
        if not self.host_path.startswith("/"):
            raise PydanticCustomError("bind_mount_path", "host_path must be an absolute path")
        if self.container_path == ".":
            raise PydanticCustomError("bind_mount_path", 'container_path must not be "."')
        return self


class ReproducibilityConfig(ConfigModel):
    """Seeds for reproducible runs.

    ``experiment_seed`` defaults to ``None`` here; like Determined, Stalwart fills it with the
    experiment's creation time (Unix seconds) when the experiment is created, so a defaulted,
    stored config always has one.
    """

    experiment_seed: int | None = Field(
        default=None,
        ge=0,
        le=2**32 - 1,
        description="Seed from which every trial's seed is derived (0 to 2^32-1). Unset: the "
        "creation time of the experiment.",
    )


class ProfilingConfig(ConfigModel):
    """System-metrics profiling of trials."""

    enabled: bool = Field(
        default=False, description="Collect system metrics (CPU, GPU, memory, network, disk)."
    )
    begin_on_batch: int = Field(
        default=0, ge=0, description="Legacy: the batch profiling began on; accepted, ignored."
    )
    end_after_batch: int | None = Field(
        default=None,
        ge=0,
        description="Legacy: the batch profiling ended after; accepted, ignored.",
    )
    sync_timings: bool = Field(
        default=True,
        description="Legacy: wait for GPU streams before ending a timing; accepted, ignored.",
    )

    @model_validator(mode="after")
    def _begin_before_end(self) -> Self:
        # Determined checks this only for enabled profiling.
        if (
            self.enabled
            and self.end_after_batch is not None
            and self.begin_on_batch > self.end_after_batch
        ):
            raise PydanticCustomError(
                "profiling_range", "begin_on_batch must be less than or equal to end_after_batch"
            )
        return self


class OptimizationsConfig(ConfigModel):
    """Distributed-training options read by Determined's trial APIs.

    Accepted as in Determined and handed to the training code. ``gradient_compression``,
    ``grad_updates_size_file``, the tensor-fusion fields and ``mixed_precision`` matter only with
    Horovod or NVIDIA Apex.
    """

    aggregation_frequency: int = Field(
        default=1,
        ge=1,
        description="Exchange gradients every this many batches (gradient accumulation).",
    )
    average_aggregated_gradients: bool = Field(
        default=True,
        description="Divide accumulated gradients by `aggregation_frequency`.",
    )
    average_training_metrics: bool = Field(
        default=True,
        description="Average training metrics over all workers instead of reporting the chief's.",
    )
    gradient_compression: bool = Field(
        default=False, description="Horovod: compress gradients in transit (fp16)."
    )
    grad_updates_size_file: str | None = Field(
        default=None,
        description="Horovod: file to record gradient update sizes to (for tensor fusion tuning).",
    )
    mixed_precision: Literal["O0", "O1", "O2", "O3"] = Field(
        default="O0",
        description="Legacy NVIDIA Apex AMP level; `O0` is off. Passed to the training code.",
    )
    tensor_fusion_threshold: int = Field(
        default=64, ge=0, description="Horovod: tensor fusion buffer size, in MB."
    )
    tensor_fusion_cycle_time: int = Field(
        default=5, ge=0, description="Horovod: tensor fusion cycle time, in milliseconds."
    )
    auto_tune_tensor_fusion: bool = Field(
        default=False, description="Horovod: tune the tensor fusion settings automatically."
    )
