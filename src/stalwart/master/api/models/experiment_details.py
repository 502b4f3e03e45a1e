"""Wire models of what Determined's web UI reads about experiments besides the experiment:
the experiment search, labels, validation history and model definition files."""

from __future__ import annotations

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest
from stalwart.master.api.models.experiments import V1Experiment
from stalwart.master.api.models.trials import V1Trial

__all__ = [
    "FileNode",
    "GetExperimentLabelsResponse",
    "GetExperimentValidationHistoryResponse",
    "GetModelDefFileRequest",
    "GetModelDefFileResponse",
    "GetModelDefTreeResponse",
    "SearchExperimentExperiment",
    "SearchExperimentsRequest",
    "SearchExperimentsResponse",
    "ValidationHistoryEntry",
]


class SearchExperimentsRequest(WireRequest):
    """``v1SearchExperimentsRequest``."""

    filter: str | None = None
    limit: int = 0
    offset: int = 0
    project_id: int | None = None
    sort: str | None = None


class SearchExperimentExperiment(WireModel):
    """``v1SearchExperimentExperiment``."""

    experiment: V1Experiment
    best_trial: V1Trial | None = None


class SearchExperimentsResponse(WireModel):
    """``v1SearchExperimentsResponse``."""

    experiments: list[SearchExperimentExperiment] = Field(default_factory=list)
    pagination: Pagination


class GetExperimentLabelsResponse(WireModel):
    """``v1GetExperimentLabelsResponse``."""

    labels: list[str] = Field(default_factory=list)


class ValidationHistoryEntry(WireModel):
    """``v1ValidationHistoryEntry``."""

    trial_id: int
    end_time: str
    searcher_metric: float


class GetExperimentValidationHistoryResponse(WireModel):
    """``v1GetExperimentValidationHistoryResponse``."""

    validation_history: list[ValidationHistoryEntry] = Field(default_factory=list)


class FileNode(WireModel):
    """``v1FileNode``."""

    path: str
    name: str
    is_dir: bool
    content_type: str = ""
    content_length: int = 0
    modified_time: str | None = None
    files: list[FileNode] = Field(default_factory=list)


class GetModelDefTreeResponse(WireModel):
    """``v1GetModelDefTreeResponse``."""

    files: list[FileNode] = Field(default_factory=list)


class GetModelDefFileRequest(WireRequest):
    """``v1GetModelDefFileRequest``."""

    experiment_id: int | None = None
    path: str = ""


class GetModelDefFileResponse(WireModel):
    """``v1GetModelDefFileResponse``: the file's bytes, base64."""

    file: str = ""
