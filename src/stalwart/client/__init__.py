"""Stalwart's Python SDK: a typed client of the master's REST API (httpx).

It needs only Stalwart's base dependencies (no FastAPI, no SQLAlchemy). Errors from the master
come back as the same :class:`~stalwart.errors.StalwartError` classes the master raised.
"""

from __future__ import annotations

from stalwart.client.auth import TokenStore, canonical_url
from stalwart.client.checkpoint import Checkpoint
from stalwart.client.client import Client, ExperimentConfig, TaskConfig
from stalwart.client.context import ContextFile, pack_context
from stalwart.client.errors import (
    ExperimentNotCompletedError,
    MasterError,
    MasterUnreachableError,
    TaskEndedError,
    WaitTimeoutError,
)
from stalwart.client.experiment import EXPERIMENT_TERMINAL_STATES, Experiment
from stalwart.client.registry import Model, ModelVersion
from stalwart.client.task import TASK_KINDS, InteractiveTask, TaskKind
from stalwart.client.trial import TRIAL_TERMINAL_STATES, Trial
from stalwart.client.workspace import Project, Workspace

__all__ = [
    "EXPERIMENT_TERMINAL_STATES",
    "TASK_KINDS",
    "TRIAL_TERMINAL_STATES",
    "Checkpoint",
    "Client",
    "ContextFile",
    "Experiment",
    "ExperimentConfig",
    "ExperimentNotCompletedError",
    "InteractiveTask",
    "MasterError",
    "MasterUnreachableError",
    "Model",
    "ModelVersion",
    "Project",
    "TaskConfig",
    "TaskEndedError",
    "TaskKind",
    "TokenStore",
    "Trial",
    "WaitTimeoutError",
    "Workspace",
    "canonical_url",
    "pack_context",
]
