"""Routes: the columns of a project's experiment table and the ranges of its numeric metrics
(``GET /projects/{id}/columns``, ``GET /projects/{id}/experiments/metric-ranges``: the web
UI's experiment table, ``bindings.get_GetProjectColumns`` and
``get_GetProjectNumericMetricsRange``); see :mod:`stalwart.master.services.project_columns`.
404 for a project the caller cannot see.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.metric_views import (
    GetProjectColumnsResponse,
    GetProjectNumericMetricsRangeResponse,
    MetricsRange,
    ProjectColumn,
)
from stalwart.master.services import project_columns as svc
from stalwart.master.services import projects as project_svc

__all__ = ["router"]

router = APIRouter(tags=["projects"])


@router.get("/projects/{project_id}/columns", response_model=GetProjectColumnsResponse)
def get_project_columns(
    project_id: int,
    caller: CallerDep,
    session: SessionDep,
    table_type: Annotated[str | None, Query(alias="tableType")] = None,
) -> GetProjectColumnsResponse:
    """The experiment table's columns (the run table, ``tableType=TABLE_TYPE_RUN``, gets the
    same: Stalwart's runs are its experiments' trials)."""
    project_svc.get_project(session, caller.user, project_id)
    return GetProjectColumnsResponse(
        columns=[
            ProjectColumn(
                column=c.column, location=c.location, type=c.type, display_name=c.display_name
            )
            for c in svc.columns(session, caller.user, project_id)
        ]
    )


@router.get(
    "/projects/{project_id}/experiments/metric-ranges",
    response_model=GetProjectNumericMetricsRangeResponse,
)
def get_metric_ranges(
    project_id: int, caller: CallerDep, session: SessionDep
) -> GetProjectNumericMetricsRangeResponse:
    """The smallest and largest value of each numeric metric summary of the project's best
    trials."""
    project_svc.get_project(session, caller.user, project_id)
    return GetProjectNumericMetricsRangeResponse(
        ranges=[
            MetricsRange(metrics_name=name, min=low, max=high)
            for name, low, high in svc.metric_ranges(session, caller.user, project_id)
        ]
    )
