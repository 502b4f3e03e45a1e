"""UI-only endpoints (a Stalwart extension, not part of Determined's API).

``GET /api/v1/ui/experiments/{id}/series``: one metric of every trial of an experiment in one
request, each series downsampled on the server (largest-triangle-three-buckets, the same as
``GET /api/v1/trials/{id}/metrics/series``) so that a chart of 100 trials x 10,000 points
receives at most ``maxPoints`` points per trial.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import Field
from sqlalchemy import select

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import WireModel
from stalwart.master.db.tables import Experiment, Trial
from stalwart.master.services import metrics as metrics_svc

__all__ = ["ExperimentSeriesResponse", "SeriesOfTrial", "router"]

router = APIRouter(tags=["ui"])

MAX_POINTS_LIMIT = 10_000
"""The most points per trial a caller may ask for."""


class SeriesOfTrial(WireModel):
    """One trial's downsampled series."""

    trial_id: int = Field(description="The trial.")
    total: int = Field(description="Numeric points reported (before downsampling).")
    batches: list[int] = Field(description="stepsCompleted of each kept point, ascending.")
    values: list[float] = Field(description="The metric at each kept point.")


class ExperimentSeriesResponse(WireModel):
    """One metric of every trial of an experiment."""

    experiment_id: int = Field(description="The experiment.")
    group: str = Field(description="Metric group (training, validation, ...).")
    metric: str = Field(description="Metric name.")
    max_points: int = Field(description="The most points kept per trial.")
    trials: list[SeriesOfTrial] = Field(description="One entry per trial, by trial id.")


@router.get("/ui/experiments/{experiment_id}/series", response_model=ExperimentSeriesResponse)
def experiment_series(
    experiment_id: int,
    metric: str,
    _caller: CallerDep,
    session: SessionDep,
    group: str = metrics_svc.VALIDATION,
    max_points: Annotated[int, Query(alias="maxPoints")] = 1000,
) -> ExperimentSeriesResponse:
    """``metric`` of ``group`` for each trial of the experiment, at most ``maxPoints`` each."""
    if not 3 <= max_points <= MAX_POINTS_LIMIT:
        raise InvalidArgumentError(
            f"maxPoints must be between 3 and {MAX_POINTS_LIMIT}, got {max_points}"
        )
    if session.get(Experiment, experiment_id) is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    trial_ids = session.scalars(
        select(Trial.id).where(Trial.experiment_id == experiment_id).order_by(Trial.id)
    ).all()
    series: list[SeriesOfTrial] = []
    for trial_id in trial_ids:
        total, points = metrics_svc.metric_series(
            session, trial_id, group=group, metric=metric, max_points=max_points
        )
        series.append(
            SeriesOfTrial(
                trial_id=trial_id,
                total=total,
                batches=[p.batches for p in points],
                values=[p.value for p in points],
            )
        )
    return ExperimentSeriesResponse(
        experiment_id=experiment_id,
        group=group,
        metric=metric,
        max_points=max_points,
        trials=series,
    )
