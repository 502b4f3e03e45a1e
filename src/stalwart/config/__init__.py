"""Experiment configuration: Determined's expconf v0 as typed pydantic models.

Public entry points: :func:`load_experiment_config` (YAML file -> defaulted, validated config),
:func:`validate_experiment` (raw mapping -> the same), :func:`merge_experiment_layers` (templates
and task_container_defaults), and the model :class:`ExperimentConfig`.
"""

from __future__ import annotations

from stalwart.config.experiment import ExperimentConfig
from stalwart.config.load import (
    DefaultsLayers,
    LoadedExperiment,
    load_experiment_config,
    merge_experiment_layers,
    validate_experiment,
)

__all__ = [
    "DefaultsLayers",
    "ExperimentConfig",
    "LoadedExperiment",
    "load_experiment_config",
    "merge_experiment_layers",
    "validate_experiment",
]
