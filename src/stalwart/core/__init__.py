"""The Core API training code imports: ``import stalwart as det``, then
``with det.core.init() as core_context: ...`` (Determined 0.38's names and behaviour).

This package never imports the master and needs neither torch nor tensorflow. See
``docs/contributing/core.md`` for the modules, the threads and the retry rules.
"""

from __future__ import annotations

from stalwart.core._checkpoint import CheckpointContext, DownloadMode, LocalCheckpointContext
from stalwart.core._client import (
    MasterAPIError,
    MasterUnreachableError,
    RetryPolicy,
    SessionClosedError,
)
from stalwart.core._context import Context, init
from stalwart.core._distributed import DistributedContext, DummyDistributedContext
from stalwart.core._info import ClusterInfo, TrialInfo, get_cluster_info
from stalwart.core._ipc import CollectiveError, CollectiveTimeoutError
from stalwart.core._preempt import LocalPreemptContext, PreemptContext, PreemptMode
from stalwart.core._profiler import DummyProfilerContext, ProfilerContext
from stalwart.core._searcher import (
    LocalSearcherContext,
    SearcherContext,
    SearcherContextMissing,
    SearcherMode,
    SearcherOperation,
    Unit,
)
from stalwart.core._storage import CheckpointNotFoundError
from stalwart.core._train import (
    EarlyExitReason,
    InvalidHP,
    LocalTrainContext,
    TensorboardMode,
    TrainContext,
)
from stalwart.core.env import TaskEnv, TaskEnvError

__all__ = [
    "CheckpointContext",
    "CheckpointNotFoundError",
    "ClusterInfo",
    "CollectiveError",
    "CollectiveTimeoutError",
    "Context",
    "DistributedContext",
    "DownloadMode",
    "DummyDistributedContext",
    "DummyProfilerContext",
    "EarlyExitReason",
    "InvalidHP",
    "LocalCheckpointContext",
    "LocalPreemptContext",
    "LocalSearcherContext",
    "LocalTrainContext",
    "MasterAPIError",
    "MasterUnreachableError",
    "PreemptContext",
    "PreemptMode",
    "ProfilerContext",
    "RetryPolicy",
    "SearcherContext",
    "SearcherContextMissing",
    "SearcherMode",
    "SearcherOperation",
    "SessionClosedError",
    "TaskEnv",
    "TaskEnvError",
    "TensorboardMode",
    "TrainContext",
    "TrialInfo",
    "Unit",
    "get_cluster_info",
    "init",
]
