"""Wire models of Determined 0.38's flat runs (``POST /api/v1/runs`` and the run actions) and of
the bulk experiment actions of a project (``/api/v1/projects/{id}/experiments/{action}``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest
from stalwart.master.api.models.projects import ExperimentActionResult

__all__ = [
    "BulkExperimentFilters",
    "BulkExperimentsRequest",
    "BulkExperimentsResponse",
    "FlatRun",
    "FlatRunExperiment",
    "MoveRunsRequest",
    "RunActionResult",
    "RunsRequest",
    "RunsResponse",
    "SearchRunsRequest",
    "SearchRunsResponse",
]


class BulkExperimentFilters(WireRequest):
    """``v1BulkExperimentFilters``."""

    archived: bool | None = None
    description: str | None = None
    excluded_experiment_ids: list[int] | None = None
    labels: list[str] | None = None
    name: str | None = None
    project_id: int | None = None
    states: list[str] | None = None
    user_ids: list[int] | None = None


class BulkExperimentsRequest(WireRequest):
    """``v1ActivateExperimentsRequest`` and its siblings (filters win over ids)."""

    experiment_ids: list[int] = Field(default_factory=list, description="What to act on.")
    project_id: int | None = Field(default=None, description="Their project (the path's).")
    filters: BulkExperimentFilters | None = None


class BulkExperimentsResponse(WireModel):
    """``v1ActivateExperimentsResponse`` and its siblings."""

    results: list[ExperimentActionResult] = Field(description="One per experiment.")


class SearchRunsRequest(WireRequest):
    """``v1SearchRunsRequest``."""

    filter: str | None = None
    limit: int = 0
    offset: int = 0
    project_id: int | None = None
    sort: str | None = None


class FlatRunExperiment(WireModel):
    """``v1FlatRunExperiment``."""

    description: str
    id: int
    is_multitrial: bool
    name: str
    progress: float
    resource_pool: str
    searcher_metric: str
    searcher_type: str
    unmanaged: bool = False
    forked_from: int | None = None


class FlatRun(WireModel):
    """``v1FlatRun``: a trial, with its experiment, project and workspace."""

    id: int
    archived: bool
    checkpoint_count: int
    checkpoint_size: str
    parent_archived: bool
    project_id: int
    project_name: str
    start_time: str
    state: str
    workspace_id: int
    workspace_name: str
    duration: int | None = None
    end_time: str | None = None
    experiment: FlatRunExperiment | None = None
    hyperparameters: dict[str, Any] | None = None
    labels: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    searcher_metric_value: float | None = None
    user_id: int | None = None


class SearchRunsResponse(WireModel):
    """``v1SearchRunsResponse``."""

    pagination: Pagination
    runs: list[FlatRun]


class RunsRequest(WireRequest):
    """``v1KillRunsRequest`` and its siblings."""

    run_ids: list[int] = Field(default_factory=list)
    project_id: int | None = None
    filter: str | None = None


class MoveRunsRequest(WireRequest):
    """``v1MoveRunsRequest``."""

    destination_project_id: int
    source_project_id: int
    run_ids: list[int] = Field(default_factory=list)
    filter: str | None = None
    skip_multitrial: bool = False


class RunActionResult(WireModel):
    """``v1RunActionResult``: an empty ``error`` means done."""

    error: str
    id: int


class RunsResponse(WireModel):
    """``v1KillRunsResponse`` and its siblings."""

    results: list[RunActionResult]
