"""UI-only endpoints (a Stalwart extension, not part of Determined's API); every one needs a
signed-in caller, as the rest of ``/api/v1`` does.

- ``GET /api/v1/ui/experiments/{id}/series``: one metric of every trial of an experiment in one
  request, each series downsampled on the server (largest-triangle-three-buckets, the same as
  ``GET /api/v1/trials/{id}/metrics/series``) so that a chart of 100 trials x 10,000 points
  receives at most ``maxPoints`` points per trial.
- ``GET /api/v1/ui/trials/{id}/series``: every metric of one group of a trial (nested profiler
  metrics flattened to ``agent/metric`` names), each downsampled to ``maxPoints``.
- ``GET /api/v1/ui/experiments/{id}/metric-names`` and ``GET /api/v1/ui/trials/{id}/metric-names``:
  the metric groups reported and the metric names in each (what the charts' pickers offer).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import WireModel
from stalwart.master.db.tables import Experiment, Trial
from stalwart.master.services import metrics as metrics_svc
from stalwart.master.ui import series as series_svc

__all__ = [
    "ExperimentSeriesResponse",
    "MetricGroupNames",
    "MetricNamesResponse",
    "SeriesOfMetric",
    "SeriesOfTrial",
    "TrialSeriesResponse",
    "router",
]

router = APIRouter(tags=["ui"])

MAX_POINTS_LIMIT = 10_000
"""The most points per trial a caller may ask for."""

CACHE = series_svc.SeriesCache()
"""Downsampled experiment series of this master process (see :class:`SeriesCache`)."""


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


class SeriesOfMetric(WireModel):
    """One flattened metric of a trial's group, downsampled."""

    metric: str = Field(description="Metric name; nested keys joined with '/'.")
    path: list[str] = Field(description="The keys from the report's top to the value.")
    total: int = Field(description="Numeric points reported (before downsampling).")
    batches: list[int] = Field(description="stepsCompleted of each kept point, ascending.")
    values: list[float] = Field(description="The metric at each kept point.")
    times: list[float] = Field(
        description="Each kept point's report time, seconds since the Unix epoch (UTC)."
    )
    epochs: list[float | None] | None = Field(
        default=None,
        description="Each kept point's report's top-level 'epoch' (or 'epochs') value; absent "
        "when no report of the metric carries one.",
    )


class TrialSeriesResponse(WireModel):
    """Every metric of one group of a trial."""

    trial_id: int = Field(description="The trial.")
    group: str = Field(description="Metric group (training, validation, cpu, gpu, ...).")
    max_points: int = Field(description="The most points kept per metric.")
    series: list[SeriesOfMetric] = Field(description="One entry per metric, by name.")


class MetricGroupNames(WireModel):
    """The metric names reported in one group."""

    group: str = Field(description="Metric group.")
    metrics: list[str] = Field(description="Metric names, sorted; nested keys joined with '/'.")


class MetricNamesResponse(WireModel):
    """The groups and metric names of a trial or of all trials of an experiment."""

    groups: list[MetricGroupNames] = Field(description="One entry per group, by name.")


def _check_max_points(max_points: int) -> None:
    if not 3 <= max_points <= MAX_POINTS_LIMIT:
        raise InvalidArgumentError(
            f"maxPoints must be between 3 and {MAX_POINTS_LIMIT}, got {max_points}"
        )


def _trial_ids(session: Session, experiment_id: int) -> list[int]:
    if session.get(Experiment, experiment_id) is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    return list(
        session.scalars(
            select(Trial.id).where(Trial.experiment_id == experiment_id).order_by(Trial.id)
        )
    )


def _names(found: dict[str, list[str]]) -> MetricNamesResponse:
    return MetricNamesResponse(
        groups=[MetricGroupNames(group=g, metrics=names) for g, names in found.items()]
    )


@router.get("/ui/experiments/{experiment_id}/metric-names", response_model=MetricNamesResponse)
def experiment_metric_names(
    experiment_id: int, _caller: CallerDep, session: SessionDep
) -> MetricNamesResponse:
    """The groups and metric names reported by the experiment's trials."""
    if session.get(Experiment, experiment_id) is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    trials = select(Trial.id).where(Trial.experiment_id == experiment_id)
    return _names(series_svc.metric_names(session, trials))


@router.get("/ui/trials/{trial_id}/metric-names", response_model=MetricNamesResponse)
def trial_metric_names(
    trial_id: int, _caller: CallerDep, session: SessionDep
) -> MetricNamesResponse:
    """The groups and metric names the trial reported (profiler groups included)."""
    if session.get(Trial, trial_id) is None:
        raise NotFoundError(f"trial {trial_id} not found")
    return _names(series_svc.metric_names(session, [trial_id]))


@router.get("/ui/trials/{trial_id}/series", response_model=TrialSeriesResponse)
def trial_series(
    trial_id: int,
    _caller: CallerDep,
    session: SessionDep,
    group: str = metrics_svc.TRAINING,
    metrics: Annotated[list[str] | None, Query()] = None,
    max_points: Annotated[int, Query(alias="maxPoints")] = 1000,
) -> TrialSeriesResponse:
    """Every metric of ``group`` (or only ``metrics``) of the trial, at most ``maxPoints`` each."""
    _check_max_points(max_points)
    if session.get(Trial, trial_id) is None:
        raise NotFoundError(f"trial {trial_id} not found")
    out: list[SeriesOfMetric] = []
    for found in series_svc.trial_group_series(session, trial_id, group, metrics or ()):
        keep = found.kept(max_points)
        epochs = [found.epochs[i] for i in keep]
        out.append(
            SeriesOfMetric(
                metric=found.name,
                path=list(found.path),
                total=len(found.batches),
                batches=[found.batches[i] for i in keep],
                values=[found.values[i] for i in keep],
                times=[found.times[i] for i in keep],
                epochs=epochs if any(e is not None for e in epochs) else None,
            )
        )
    return TrialSeriesResponse(trial_id=trial_id, group=group, max_points=max_points, series=out)


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
    _check_max_points(max_points)
    trial_ids = _trial_ids(session, experiment_id)
    found = CACHE.experiment(session, trial_ids, group, metric, max_points)
    series = [
        SeriesOfTrial(
            trial_id=trial_id,
            total=found[trial_id].total,
            batches=found[trial_id].batches,
            values=found[trial_id].values,
        )
        for trial_id in trial_ids
    ]
    return ExperimentSeriesResponse(
        experiment_id=experiment_id,
        group=group,
        metric=metric,
        max_points=max_points,
        trials=series,
    )
