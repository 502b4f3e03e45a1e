"""The wire models the SDK validates the master's answers with.

Where the master's own models import without the master's dependencies (the trial models and
the shared conventions), they are used as they are. The others live next to database code on
the master, so the SDK declares the subset of their fields it reads here, in the same dialect
(:class:`~stalwart.master.api.models.common.WireModel`: lowerCamelCase on the wire, unknown keys
ignored). ``tests/client/test_models.py`` checks that every field declared here exists on the
master's model of the same name, with the same required-ness.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel
from stalwart.master.api.models.trials import (
    GetExperimentTrialsResponse,
    GetTrialResponse,
    GetTrialWorkloadsResponse,
    MetricsReport,
    MetricsReportsResponse,
    MetricsWorkload,
    V1Trial,
    WorkloadContainer,
)

__all__ = [
    "CheckpointsResponse",
    "CreateExperimentResponse",
    "GetAgentsResponse",
    "GetCheckpointResponse",
    "GetExperimentResponse",
    "GetExperimentTrialsResponse",
    "GetExperimentsResponse",
    "GetMasterResponse",
    "GetTasksResponse",
    "GetTrialResponse",
    "GetTrialWorkloadsResponse",
    "GetUsersResponse",
    "LoginResponse",
    "MasterConfigResponse",
    "MasterLogEntry",
    "MasterLogsResponse",
    "MeResponse",
    "MetricsReport",
    "MetricsReportsResponse",
    "MetricsWorkload",
    "ModelDefResponse",
    "Pagination",
    "TaskSummary",
    "TaskSummaryResources",
    "TrialLogsResponse",
    "UserResponse",
    "V1Agent",
    "V1Checkpoint",
    "V1CheckpointTrainingMetadata",
    "V1Container",
    "V1Device",
    "V1Experiment",
    "V1Metrics",
    "V1Slot",
    "V1Trial",
    "V1User",
    "WorkloadContainer",
]


# --- users ------------------------------------------------------------------------------------


class V1User(WireModel):
    """``v1User``."""

    id: int | None = Field(default=None, description="User id.")
    username: str = Field(description="Login name.")
    admin: bool = Field(description="Whether the user is an admin.")
    active: bool = Field(description="Whether the user may log in.")
    display_name: str | None = Field(default=None, description="Display name.")
    remote: bool = Field(default=False, description="Managed by an external identity provider.")
    modified_at: str | None = Field(default=None, description="Last change (RFC 3339).")
    last_auth_at: str | None = Field(default=None, description="Last login (RFC 3339).")


class LoginResponse(WireModel):
    token: str = Field(description="Session token for `Authorization: Bearer`.")
    user: V1User = Field(description="The logged-in user.")


class MeResponse(WireModel):
    user: V1User = Field(description="The calling user.")


class UserResponse(WireModel):
    user: V1User = Field(description="The user.")


class GetUsersResponse(WireModel):
    users: list[V1User] = Field(default_factory=list, description="This page of users.")
    pagination: Pagination = Field(description="Where this page lies in the filtered list.")


# --- experiments ------------------------------------------------------------------------------


class V1Experiment(WireModel):
    """``v1Experiment`` (the fields the SDK and CLI read)."""

    id: int = Field(description="Experiment id.")
    name: str = Field(description="Name.")
    state: str = Field(description="experimentv1State, e.g. STATE_ACTIVE.")
    archived: bool = Field(description="Archived.")
    config: dict[str, Any] = Field(description="The fully defaulted config.")
    job_id: str = Field(description="Job id.")
    num_trials: int = Field(description="Trials created so far.")
    original_config: str = Field(description="The YAML as submitted.")
    project_id: int = Field(description="Project id.")
    searcher_type: str = Field(description="Searcher name.")
    start_time: str = Field(description="Creation time (RFC 3339).")
    username: str = Field(description="Owner's username.")
    description: str | None = Field(default=None, description="Description.")
    labels: list[str] = Field(default_factory=list, description="Labels.")
    end_time: str | None = Field(default=None, description="When it ended.")
    progress: float | None = Field(default=None, description="0 to 1, or null if unknown.")
    resource_pool: str = Field(default="default", description="Resource pool.")
    forked_from: int | None = Field(default=None, description="Parent experiment.")
    trial_ids: list[int] | None = Field(default=None, description="Ids of its trials.")
    searcher_metric: str | None = Field(default=None, description="The searcher's metric.")
    checkpoint_size: str = Field(default="0", description="Bytes of checkpoints (int64).")
    checkpoint_count: int = Field(default=0, description="Number of checkpoints.")
    best_trial_id: int | None = Field(default=None, description="Trial with the best metric.")
    best_trial_searcher_metric: float | None = Field(
        default=None, description="The best searcher metric value of its trials."
    )


class CreateExperimentResponse(WireModel):
    experiment: V1Experiment = Field(description="The new experiment.")
    config: dict[str, Any] | None = Field(description="Its fully defaulted config.")
    warnings: list[str] = Field(default_factory=list, description="Launch warnings.")
    notices: list[str] = Field(
        default_factory=list, description="What to know about the defaulted config."
    )


class GetExperimentResponse(WireModel):
    experiment: V1Experiment = Field(description="The experiment.")
    config: dict[str, Any] | None = Field(default=None, description="Its fully defaulted config.")


class GetExperimentsResponse(WireModel):
    experiments: list[V1Experiment] = Field(description="One page of experiments.")
    pagination: Pagination = Field(description="Where this page is.")


class ModelDefResponse(WireModel):
    b64_tgz: str = Field(description="Base64 of the archive; empty when there is none.")


# --- checkpoints ------------------------------------------------------------------------------


class V1Metrics(WireModel):
    avg_metrics: dict[str, Any] = Field(default_factory=dict, description="Averaged metrics.")


class V1CheckpointTrainingMetadata(WireModel):
    trial_id: int | None = Field(default=None, description="The trial that saved it.")
    experiment_id: int | None = Field(default=None, description="Its experiment.")
    experiment_config: dict[str, Any] | None = Field(
        default=None, description="The experiment's fully defaulted config."
    )
    hparams: dict[str, Any] | None = Field(default=None, description="The trial's hparams.")
    training_metrics: V1Metrics | None = Field(default=None, description="Training metrics.")
    validation_metrics: V1Metrics | None = Field(default=None, description="Validation metrics.")
    searcher_metric: float | None = Field(default=None, description="The searcher metric.")


class V1Checkpoint(WireModel):
    """``v1Checkpoint``."""

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
    checkpoints: list[V1Checkpoint] = Field(default_factory=list, description="A page of them.")
    pagination: Pagination = Field(default_factory=Pagination, description="Pagination.")


# --- logs -------------------------------------------------------------------------------------


class TrialLogsResponse(WireModel):
    """One line of a trial's log stream."""

    id: str = Field(description="Line id (a string on the wire).")
    trial_id: int = Field(description="Trial id.")
    timestamp: str = Field(description="When it was written (RFC 3339).")
    level: str = Field(description="LOG_LEVEL_*.")
    message: str = Field(description="Determined's flat line, ending in a newline.")
    log: str = Field(description="The raw line.")
    agent_id: str | None = Field(default=None, description="Agent.")
    container_id: str | None = Field(default=None, description="Container.")
    rank_id: int | None = Field(default=None, description="Process rank.")
    source: str | None = Field(default=None, description="Source.")
    stdtype: str | None = Field(default=None, description="stdout or stderr.")


# --- cluster ----------------------------------------------------------------------------------


class V1Device(WireModel):
    id: int | None = Field(default=None, description="Device index on its agent.")
    brand: str | None = Field(default=None, description="Device brand.")
    uuid: str | None = Field(default=None, description="Device UUID.")
    type: str | None = Field(default=None, description="TYPE_CPU, TYPE_CUDA or TYPE_ROCM.")


class V1Container(WireModel):
    id: str = Field(description="Container (resources) id.")
    state: str = Field(description="containerv1State, e.g. STATE_RUNNING.")


class V1Slot(WireModel):
    id: str | None = Field(default=None, description="Slot id.")
    device: V1Device | None = Field(default=None, description="The device.")
    enabled: bool | None = Field(default=None, description="Whether it may be scheduled.")
    draining: bool | None = Field(default=None, description="Disabled, letting work finish.")
    container: V1Container | None = Field(default=None, description="Its container, if any.")


class V1Agent(WireModel):
    id: str = Field(description="Agent id.")
    registered_time: str | None = Field(default=None, description="When it registered.")
    slots: dict[str, V1Slot] | None = Field(default=None, description="Slots by slot id.")
    resource_pools: list[str] = Field(default_factory=list, description="Its resource pool.")
    addresses: list[str] = Field(default_factory=list, description="Its addresses.")
    enabled: bool = Field(default=True, description="Whether it may be scheduled.")
    draining: bool = Field(default=False, description="Disabled, letting work finish.")
    version: str = Field(default="", description="Agent version.")


class GetAgentsResponse(WireModel):
    agents: list[V1Agent] = Field(default_factory=list, description="The agents.")


class TaskSummaryResources(WireModel):
    container_id: str = Field(description="Container id (the slot list joins on it).")


class TaskSummary(WireModel):
    task_id: str = Field(description="Task id.")
    allocation_id: str = Field(description="Allocation id.")
    name: str = Field(description="Task name.")
    resources: list[TaskSummaryResources] | None = Field(default=None, description="Resources.")


class GetTasksResponse(WireModel):
    allocation_id_to_summary: dict[str, TaskSummary] = Field(
        default_factory=dict, description="Live allocations by id."
    )


class GetMasterResponse(WireModel):
    version: str = Field(description="The Determined wire version the master speaks.")
    master_id: str = Field(description="This master process.")
    cluster_id: str = Field(description="This cluster.")
    cluster_name: str = Field(description="The configured cluster name.")
    stalwart_version: str | None = Field(default=None, description="Stalwart's own version.")


class MasterConfigResponse(WireModel):
    config: dict[str, Any] = Field(description="The master's settings (secrets removed).")


class MasterLogEntry(WireModel):
    """``v1LogEntry``: one record of the master's own log."""

    id: int = Field(description="Entry id: grows by one per record.")
    timestamp: str = Field(description="When it was logged (RFC 3339).")
    level: str = Field(description="LOG_LEVEL_*.")
    message: str = Field(description="``<logger>: <message>``, then the traceback if any.")


class MasterLogsResponse(WireModel):
    """One line of the master's log stream."""

    log_entry: MasterLogEntry = Field(description="The entry.")
