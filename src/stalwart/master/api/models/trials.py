"""Wire models of trials, workloads, metrics and runs (wire doc 4.3 and 5.5)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "CheckpointWorkload",
    "CreateTrialRequest",
    "GetExperimentTrialsResponse",
    "GetTrialResponse",
    "GetTrialWorkloadsResponse",
    "MetricSeriesPoint",
    "MetricSeriesResponse",
    "MetricsBody",
    "MetricsReport",
    "MetricsReportsResponse",
    "MetricsWorkload",
    "PatchTrialRequest",
    "PutTrialRequest",
    "ReportTrialMetricsBatchRequest",
    "ReportTrialMetricsRequest",
    "ReportTrialProgressRequest",
    "RunMetadataRequest",
    "RunMetadataResponse",
    "RunPrepareRequest",
    "RunPrepareResponse",
    "StartTrialRequest",
    "StartTrialResponse",
    "TrialEarlyExitRequest",
    "TrialMetricsBody",
    "TrialResponse",
    "TrialRunnerMetadataRequest",
    "TrialSortBy",
    "V1Metrics",
    "V1Trial",
    "WorkloadContainer",
    "WorkloadFilter",
]


class V1Metrics(WireModel):
    """``v1Metrics``: REQUIRED avgMetrics; batchMetrics optional."""

    avg_metrics: dict[str, Any] = Field(description="Metric name -> value.")
    batch_metrics: list[dict[str, Any]] | None = Field(
        default=None, description="Per-batch metrics, when asked for."
    )


class MetricsWorkload(WireModel):
    """``v1MetricsWorkload``: REQUIRED metrics, numInputs, totalBatches."""

    metrics: V1Metrics = Field(description="The reported metrics.")
    num_inputs: int = Field(default=0, description="Always 0 (Core API reports carry none).")
    total_batches: int = Field(description="stepsCompleted of the report.")
    end_time: str | None = Field(default=None, description="When it was reported.")


class CheckpointWorkload(WireModel):
    """``v1CheckpointWorkload``: REQUIRED state and totalBatches."""

    uuid: str | None = Field(default=None, description="Checkpoint UUID.")
    state: str = Field(description="checkpointv1State, e.g. STATE_COMPLETED.")
    total_batches: int = Field(description="steps_completed of the checkpoint.")
    end_time: str | None = Field(default=None, description="When it was reported.")
    resources: dict[str, str] | None = Field(default=None, description="Path -> size (int64).")
    metadata: dict[str, Any] | None = Field(default=None, description="User metadata.")


class WorkloadContainer(WireModel):
    """``v1WorkloadContainer``: exactly one of training, validation, checkpoint is set."""

    training: MetricsWorkload | None = Field(default=None, description="A training report.")
    validation: MetricsWorkload | None = Field(default=None, description="A validation report.")
    checkpoint: CheckpointWorkload | None = Field(default=None, description="A checkpoint.")


class V1Trial(WireModel):
    """``trialv1Trial``; every field without a default is REQUIRED by the official client."""

    id: int = Field(description="Trial id.")
    experiment_id: int = Field(description="Its experiment.")
    hparams: dict[str, Any] = Field(description="Sampled hyperparameters.")
    restarts: int = Field(description="Restarts after failures.")
    start_time: str = Field(description="Creation time (RFC 3339).")
    state: str = Field(description="trialv1State; active trials show QUEUED..RUNNING.")
    total_batches_processed: int = Field(description="Highest stepsCompleted reported.")
    end_time: str | None = Field(default=None, description="When it ended.")
    task_id: str | None = Field(default=None, description="Its task.")
    task_ids: list[str] = Field(default_factory=list, description="Its tasks.")
    latest_validation: MetricsWorkload | None = Field(
        default=None, description="The last validation report."
    )
    best_validation: MetricsWorkload | None = Field(
        default=None, description="The validation report with the best searcher metric."
    )
    runner_state: str | None = Field(default=None, description="What the trial says it does.")
    wall_clock_time: float | None = Field(default=None, description="Seconds its runs took.")
    searcher_metric_value: float | None = Field(
        default=None, description="Best searcher metric value so far."
    )
    checkpoint_count: int | None = Field(default=None, description="Completed checkpoints.")
    total_checkpoint_size: str | None = Field(default=None, description="Bytes (int64).")
    metadata: dict[str, Any] | None = Field(default=None, description="Run metadata.")
    summary_metrics: dict[str, Any] | None = Field(
        default=None,
        description="Per metric group, per metric: type, last, and min/max/sum/mean/count of "
        "numbers (:mod:`stalwart.master.services.summary_metrics`).",
    )
    warm_start_checkpoint_uuid: str | None = Field(
        default=None, description="The checkpoint the trial started from, if any."
    )
    log_policy_matched: str | None = Field(
        default=None,
        description="Name of the last log policy one of its lines matched (``CUDA OOM``...).",
    )


class TrialSortBy(StrEnum):
    """``v1GetExperimentTrialsRequestSortBy``."""

    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    ID = "SORT_BY_ID"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    BEST_VALIDATION_METRIC = "SORT_BY_BEST_VALIDATION_METRIC"
    LATEST_VALIDATION_METRIC = "SORT_BY_LATEST_VALIDATION_METRIC"
    BATCHES_PROCESSED = "SORT_BY_BATCHES_PROCESSED"
    DURATION = "SORT_BY_DURATION"
    RESTARTS = "SORT_BY_RESTARTS"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    LOG_RETENTION_DAYS = "SORT_BY_LOG_RETENTION_DAYS"


class WorkloadFilter(StrEnum):
    """``GetTrialWorkloadsRequestFilterOption``."""

    UNSPECIFIED = "FILTER_OPTION_UNSPECIFIED"
    CHECKPOINT = "FILTER_OPTION_CHECKPOINT"
    VALIDATION = "FILTER_OPTION_VALIDATION"
    CHECKPOINT_OR_VALIDATION = "FILTER_OPTION_CHECKPOINT_OR_VALIDATION"


class GetTrialResponse(WireModel):
    trial: V1Trial = Field(description="The trial.")


class GetExperimentTrialsResponse(WireModel):
    trials: list[V1Trial] = Field(description="One page of trials.")
    pagination: Pagination = Field(description="Where this page is.")


class GetTrialWorkloadsResponse(WireModel):
    workloads: list[WorkloadContainer] = Field(description="One page of workloads.")
    pagination: Pagination = Field(description="Where this page is.")


class MetricsBody(WireRequest):
    """``v1Metrics`` as sent: avgMetrics (values may be "NaN"/"Infinity" strings)."""

    avg_metrics: dict[str, Any] = Field(description="Metric name -> value.")
    batch_metrics: list[dict[str, Any]] | None = Field(default=None, description="Per batch.")


class TrialMetricsBody(WireRequest):
    """``v1TrialMetrics`` as sent by the harness."""

    metrics: MetricsBody = Field(description="The metrics.")
    trial_id: int = Field(description="The trial (must match the path).")
    trial_run_id: int = Field(description="The run that reports (must be the current one).")
    steps_completed: int | None = Field(default=None, description="Batches done so far.")
    report_time: str | None = Field(default=None, description="When (RFC 3339); default now.")


class ReportTrialMetricsRequest(WireRequest):
    """``v1ReportTrialMetricsRequest``."""

    group: str = Field(description="training, validation, or a custom group.")
    metrics: TrialMetricsBody = Field(description="The report.")


class ReportTrialMetricsBatchRequest(WireRequest):
    """Several reports in one request (a Stalwart extension): stored all or none."""

    reports: list[ReportTrialMetricsRequest] = Field(
        description="Reports of any trials, each as the single-report body."
    )


class ReportTrialProgressRequest(WireRequest):
    """``{progress, is_raw}`` (``isRaw`` also accepted)."""

    progress: float = Field(description="0 to 1.")
    is_raw: bool | None = Field(default=None, description="Accepted; progress is always 0..1.")
    trial_id: int | None = Field(default=None, description="Ignored (the path names it).")


class RunPrepareRequest(WireRequest):
    """``v1RunPrepareForReportingRequest``."""

    run_id: int = Field(description="The trial id.")
    checkpoint_storage: dict[str, Any] | None = Field(
        default=None, description="The checkpoint storage config the task will use."
    )


class RunPrepareResponse(WireModel):
    storage_id: int | None = Field(default=None, description="Id of the storage config.")


class RunMetadataRequest(WireRequest):
    """``v1PostRunMetadataRequest``."""

    metadata: dict[str, Any] = Field(description="Metadata merged into the run's.")
    run_id: int | None = Field(default=None, description="Ignored (the path names it).")


class RunMetadataResponse(WireModel):
    metadata: dict[str, Any] | None = Field(default=None, description="The run's metadata.")


class TrialEarlyExitRequest(WireRequest):
    """``v1TrialEarlyExit``."""

    reason: str = Field(description="EXITED_REASON_INVALID_HP or EXITED_REASON_INIT_INVALID_HP.")


class TrialRunnerMetadataRequest(WireRequest):
    """``v1TrialRunnerMetadata``."""

    state: str = Field(description="A short status the UI shows.")


class MetricsReport(WireModel):
    """``v1MetricsReport`` (streamed); every field is REQUIRED.

    ``metrics`` follows Determined's stored shape: ``{"avg_metrics": ..., "batch_metrics": ...}``
    for training and custom groups, ``{"validation_metrics": ...}`` for validation.
    """

    id: int = Field(description="Report id.")
    trial_id: int = Field(description="The trial.")
    trial_run_id: int = Field(description="The run that reported it.")
    group: str = Field(description="Metric group.")
    total_batches: int = Field(description="stepsCompleted.")
    end_time: str = Field(description="Report time (RFC 3339).")
    archived: bool = Field(description="Superseded by a restart.")
    metrics: dict[str, Any] = Field(description="See the class docstring.")


class MetricsReportsResponse(WireModel):
    """One line of the metrics streams: ``{"metrics": [v1MetricsReport...]}``."""

    metrics: list[MetricsReport] = Field(description="A batch of reports.")


class MetricSeriesPoint(WireModel):
    batches: int = Field(description="stepsCompleted.")
    value: float = Field(description="The metric value.")
    time: str | None = Field(default=None, description="Report time.")


class MetricSeriesResponse(WireModel):
    """A downsampled metric series of one trial (a Stalwart extension for charts)."""

    trial_id: int = Field(description="The trial.")
    group: str = Field(description="Metric group.")
    metric: str = Field(description="Metric name.")
    total: int = Field(description="Numeric points before downsampling.")
    points: list[MetricSeriesPoint] = Field(description="At most maxPoints points.")


class TrialSourceInfo(WireRequest):
    """``v1TrialSourceInfo``: a checkpoint (and model version) a trial used."""

    checkpoint_uuid: str = Field(description="The checkpoint used.")
    trial_id: int = Field(description="The trial that used it.")
    trial_source_info_type: str = Field(
        default="TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED",
        description="TRIAL_SOURCE_INFO_TYPE_INFERENCE / _FINE_TUNING / _UNSPECIFIED.",
    )
    model_id: int | None = Field(default=None, description="Model of the version used.")
    model_version: int | None = Field(default=None, description="Version number used.")


class ReportTrialSourceInfoRequest(WireRequest):
    trial_source_info: TrialSourceInfo = Field(description="The link to record.")


class ReportTrialSourceInfoResponse(WireModel):
    checkpoint_uuid: str = Field(description="The checkpoint linked.")
    trial_id: int = Field(description="The trial linked.")


class CreateTrialRequest(WireRequest):
    """``v1CreateTrialRequest``: a trial of an unmanaged experiment (the SDK's core_v2)."""

    experiment_id: int = Field(description="The unmanaged experiment.")
    hparams: dict[str, Any] | None = Field(default=None, description="Its hyperparameters.")
    unmanaged: bool = Field(default=False, description="Must be true.")


class PutTrialRequest(WireRequest):
    """``v1PutTrialRequest``: the trial of an external trial id, created the first time."""

    create_trial_request: CreateTrialRequest = Field(description="What to create.")
    external_trial_id: str = Field(description="The script's own id of the trial.")


class TrialResponse(WireModel):
    """``v1CreateTrialResponse`` / ``v1PutTrialResponse`` / ``v1PatchTrialResponse``."""

    trial: V1Trial = Field(description="The trial.")


class StartTrialRequest(WireRequest):
    """``v1StartTrialRequest``."""

    trial_id: int | None = Field(default=None, description="The trial (also in the path).")
    resume: bool = Field(default=False, description="Allow a trial started before.")


class StartTrialResponse(WireModel):
    """``v1StartTrialResponse``: REQUIRED trialRunId and stepsCompleted."""

    trial_run_id: int = Field(description="The new run's id.")
    steps_completed: int = Field(description="Steps of the checkpoint it resumes from.")
    latest_checkpoint: str | None = Field(default=None, description="That checkpoint's uuid.")


class PatchTrialRequest(WireRequest):
    """``v1PatchTrialRequest``: an unmanaged trial's heartbeat, with its state."""

    trial_id: int | None = Field(default=None, description="The trial (also in the path).")
    state: str | None = Field(default=None, description="trialv1State, e.g. STATE_COMPLETED.")
