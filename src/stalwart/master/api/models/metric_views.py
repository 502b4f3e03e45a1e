"""Wire models of the metric views of Determined's web UI: the trial comparison series
(``GET /api/v1/trials/time-series``), the experiment metric streams
(``/api/v1/experiments/.../metrics-stream/...``) and a project's table columns and metric
ranges."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import WireModel
from stalwart.master.api.models.trials import V1Trial

__all__ = [
    "ComparableTrial",
    "CompareTrialsResponse",
    "DataPoint",
    "DownsampledMetrics",
    "ExpMetricNamesResponse",
    "GetProjectColumnsResponse",
    "GetProjectNumericMetricsRangeResponse",
    "MetricBatchesResponse",
    "MetricIdentifier",
    "MetricsRange",
    "ProjectColumn",
    "SampleTrial",
    "SnapshotTrial",
    "TrialsSampleResponse",
    "TrialsSnapshotResponse",
]


class DataPoint(WireModel):
    """``v1DataPoint``: one report's batches, time, epoch and values."""

    batches: int
    time: str
    epoch: float | None = None
    values: dict[str, Any] = Field(default_factory=dict)


class DownsampledMetrics(WireModel):
    """``v1DownsampledMetrics``."""

    data: list[DataPoint]
    group: str
    type: str


class ComparableTrial(WireModel):
    """``v1ComparableTrial``."""

    metrics: list[DownsampledMetrics]
    trial: V1Trial


class CompareTrialsResponse(WireModel):
    """``v1CompareTrialsResponse``."""

    trials: list[ComparableTrial]


class MetricIdentifier(WireModel):
    """``v1MetricIdentifier``."""

    group: str
    name: str


class ExpMetricNamesResponse(WireModel):
    """``v1ExpMetricNamesResponse``."""

    searcher_metrics: list[str] = Field(default_factory=list)
    training_metrics: list[str] = Field(default_factory=list)
    validation_metrics: list[str] = Field(default_factory=list)
    metric_names: list[MetricIdentifier] = Field(default_factory=list)


class MetricBatchesResponse(WireModel):
    """``v1MetricBatchesResponse``."""

    batches: list[int] = Field(default_factory=list)


class SnapshotTrial(WireModel):
    """``v1TrialsSnapshotResponseTrial``."""

    trial_id: int
    hparams: dict[str, Any]
    metric: float
    batches_processed: int


class TrialsSnapshotResponse(WireModel):
    """``v1TrialsSnapshotResponse``."""

    trials: list[SnapshotTrial]


class SampleTrial(WireModel):
    """``v1TrialsSampleResponseTrial``."""

    trial_id: int
    hparams: dict[str, Any]
    data: list[DataPoint]


class TrialsSampleResponse(WireModel):
    """``v1TrialsSampleResponse``."""

    trials: list[SampleTrial]
    promoted_trials: list[int]
    demoted_trials: list[int]


class ProjectColumn(WireModel):
    """``v1ProjectColumn``."""

    column: str
    location: str
    type: str
    display_name: str | None = None


class GetProjectColumnsResponse(WireModel):
    """``v1GetProjectColumnsResponse``."""

    columns: list[ProjectColumn]


class MetricsRange(WireModel):
    """``v1MetricsRange``."""

    metrics_name: str
    min: float
    max: float


class GetProjectNumericMetricsRangeResponse(WireModel):
    """``v1GetProjectNumericMetricsRangeResponse``."""

    ranges: list[MetricsRange]
