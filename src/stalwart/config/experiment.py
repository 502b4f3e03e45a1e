"""The experiment config (Determined's expconf v0, as of Determined 0.38).

:class:`ExperimentConfig` validated from a user's (merged) YAML is the fully defaulted config that
an experiment's tasks receive. Two values are filled in later, by the master, at creation:
``name`` (when unset) and ``reproducibility.experiment_seed``; ``checkpoint_storage`` comes from
the master config when neither the experiment nor its template sets it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from stalwart.config.base import ConfigModel
from stalwart.config.environment import EnvironmentConfig
from stalwart.config.hpc import PbsConfig, SlurmConfig
from stalwart.config.hyperparameters import Hyperparameters
from stalwart.config.integrations import IntegrationsConfig
from stalwart.config.legacy import DataLayerConfig, SecurityConfig
from stalwart.config.policies import DEFAULT_LOG_POLICIES, LogPolicies, RetentionPolicyConfig
from stalwart.config.resources import ResourcesConfig
from stalwart.config.searcher import SearcherConfig
from stalwart.config.sections import (
    BindMount,
    Length,
    OptimizationsConfig,
    ProfilingConfig,
    ReproducibilityConfig,
)
from stalwart.config.storage import CheckpointStorageConfig

__all__ = ["ExperimentConfig"]


def _no_length() -> Length:
    return Length(batches=0)


class ExperimentConfig(ConfigModel):
    """An experiment: what to run, over which hyperparameters, on what, and how to keep it."""

    name: str | None = Field(
        default=None, description="Short name; the master makes one up when unset."
    )
    description: str | None = Field(default=None, description="Longer human-readable text.")
    labels: list[str] = Field(default_factory=list, description="Labels for grouping.")
    workspace: str | None = Field(
        default=None, description="Workspace to create the experiment in (with `project`)."
    )
    project: str | None = Field(
        default=None, description="Project to create the experiment in (with `workspace`)."
    )
    entrypoint: str | list[str] | None = Field(
        default=None,
        description="The command that starts training (`python3 train.py`, a launch layer "
        "such as `python3 -m determined.launch.torch_distributed python3 train.py`), or a "
        "legacy trial class `model_def:MyTrial`. Required.",
    )
    data: dict[str, Any] = Field(
        default_factory=dict, description="Free-form settings for your data loading code."
    )
    hyperparameters: Hyperparameters = Field(
        default_factory=dict, description="The hyperparameter space, by name."
    )
    searcher: SearcherConfig = Field(description="How the hyperparameter space is explored.")
    resources: ResourcesConfig = Field(
        default_factory=ResourcesConfig, description="Slots, pool and priority of each trial."
    )
    environment: EnvironmentConfig = Field(
        default_factory=EnvironmentConfig,
        description="The task environment: image, environment variables, framework.",
    )
    checkpoint_storage: CheckpointStorageConfig | None = Field(
        default=None,
        description="Where checkpoints are stored; the master's setting when unset.",
    )
    checkpoint_policy: Literal["best", "all", "none"] = Field(
        default="best",
        description="Which validations are followed by a checkpoint: those better than every "
        "earlier one (`best`), `all`, or `none`.",
    )
    min_validation_period: Length = Field(
        default_factory=_no_length, description="Validate at least this often."
    )
    min_checkpoint_period: Length = Field(
        default_factory=_no_length, description="Checkpoint at least this often."
    )
    max_restarts: int = Field(
        default=5, ge=0, description="Restarts of a failing trial before it is marked errored."
    )
    scheduling_unit: int = Field(
        default=100,
        ge=1,
        description="Batches between system operations (preemption checks, progress) in "
        "legacy trial APIs.",
    )
    records_per_epoch: int = Field(
        default=0, ge=0, description="Records in one epoch; needed for lengths in epochs."
    )
    perform_initial_validation: bool = Field(
        default=False, description="Validate once before training starts."
    )
    reproducibility: ReproducibilityConfig = Field(
        default_factory=ReproducibilityConfig, description="Random seeds."
    )
    bind_mounts: list[BindMount] = Field(
        default_factory=list, description="Host directories mounted into the task."
    )
    debug: bool = Field(default=False, description="Verbose logging in the harness.")
    profiling: ProfilingConfig = Field(
        default_factory=ProfilingConfig, description="The system-metrics profiler."
    )
    optimizations: OptimizationsConfig = Field(
        default_factory=OptimizationsConfig,
        description="Distributed-training tuning of the legacy trial APIs.",
    )
    log_policies: LogPolicies = Field(
        default_factory=lambda: list(DEFAULT_LOG_POLICIES),
        description="Regular expressions matched against trial logs, and what a match does. "
        "The defaults label CUDA out-of-memory and ECC errors.",
    )
    retention_policy: RetentionPolicyConfig | None = Field(
        default=None, description="How long trial logs are kept."
    )
    slurm: SlurmConfig = Field(
        default_factory=SlurmConfig, description="Options for Slurm resource managers."
    )
    pbs: PbsConfig = Field(default_factory=PbsConfig, description="Options for PBS.")
    integrations: IntegrationsConfig | None = Field(
        default=None, description="Third-party integrations (Pachyderm, webhooks)."
    )
    security: SecurityConfig | None = Field(
        default=None, description="Legacy security settings; accepted and ignored."
    )
    data_layer: DataLayerConfig | None = Field(
        default=None, description="Legacy data layer; accepted and ignored."
    )
    tensorboard_storage: dict[str, Any] | None = Field(
        default=None, description="Legacy TensorBoard storage; accepted and ignored."
    )
    internal: dict[str, Any] | None = Field(
        default=None, description="Determined-internal settings; accepted and ignored."
    )
