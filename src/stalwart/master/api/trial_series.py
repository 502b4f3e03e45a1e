"""Route: ``GET /trials/time-series`` (Determined's ``CompareTrials``: downsampled metrics of
several trials, which the web UI's comparison charts and ``bindings.get_CompareTrials`` read).

Registered before :mod:`stalwart.master.api.trials`, whose ``/trials/{trial_id}`` would take
the path. Reading a trial needs a role that sees its experiment (the ``trialIds`` are checked
by :func:`stalwart.master.policy.authorize_user_request`); unknown trials are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Query, Request

from stalwart.errors import InvalidArgumentError
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.metric_views import (
    ComparableTrial,
    CompareTrialsResponse,
    DataPoint,
    DownsampledMetrics,
)
from stalwart.master.api.trials import trial_to_wire
from stalwart.master.services import trial_series as series

__all__ = ["data_points", "router"]

router = APIRouter(tags=["trials"])

_TYPE_OF_GROUP = {
    "training": "METRIC_TYPE_TRAINING",
    "validation": "METRIC_TYPE_VALIDATION",
    "profiling": "METRIC_TYPE_PROFILING",
}


def data_points(points: Sequence[series.Point]) -> list[DataPoint]:
    """The ``v1DataPoint`` of each kept report."""
    return [
        DataPoint(batches=p.batches, time=wire_time(p.time) or "", epoch=p.epoch, values=p.values)
        for p in points
    ]


@router.get("/trials/time-series", response_model=CompareTrialsResponse)
def compare_trials(
    request: Request,
    _caller: CallerDep,
    session: SessionDep,
    trial_ids: Annotated[list[int] | None, Query(alias="trialIds")] = None,
    metric_names: Annotated[list[str] | None, Query(alias="metricNames")] = None,
    metric_ids: Annotated[list[str] | None, Query(alias="metricIds")] = None,
    metric_type: Annotated[str | None, Query(alias="metricType")] = None,
    group: str = "",
    max_datapoints: Annotated[int, Query(alias="maxDatapoints")] = 0,
    start_batches: Annotated[int, Query(alias="startBatches")] = 0,
    end_batches: Annotated[int, Query(alias="endBatches")] = 0,
) -> CompareTrialsResponse:
    """Each trial (ascending id) with its downsampled metrics, grouped (see
    :mod:`stalwart.master.services.trial_series`); ``maxDatapoints`` 0 means 200 per group,
    ``endBatches`` 0 means no end; 400 for a ``timeSeriesFilter`` (not served yet)."""
    if any(key.startswith("timeSeriesFilter.") for key in request.query_params):
        raise InvalidArgumentError(
            "timeSeriesFilter is not supported by Stalwart yet: select the window with "
            "startBatches and endBatches"
        )
    wanted = series.group_names(metric_names or [], metric_ids or [], metric_type, group)
    compared = series.compare_trials(
        session,
        trial_ids or [],
        wanted,
        max_points=max_datapoints,
        start_batches=start_batches,
        end_batches=end_batches,
    )
    out = [
        ComparableTrial(
            trial=trial_to_wire(view),
            metrics=[
                DownsampledMetrics(
                    group=g.group,
                    type=_TYPE_OF_GROUP.get(g.group, "METRIC_TYPE_UNSPECIFIED"),
                    data=data_points(g.points),
                )
                for g in groups
            ],
        )
        for view, groups in compared
    ]
    return CompareTrialsResponse(trials=out)
