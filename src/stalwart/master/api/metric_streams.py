"""Routes: the experiment metric streams of Determined's web UI (``bindings.get_ExpMetricNames``,
``get_MetricBatches``, ``get_TrialsSnapshot``, ``get_TrialsSample``).

Each is newline-delimited JSON, one ``{"result": ...}`` line per step of its
:mod:`stalwart.master.services.metric_streams` stream: the first at once, then one every
``periodSeconds`` (default 30) with what is new, until the experiment (every one, for names)
is terminal. Bad requests and unknown experiments are answered 400/404 before the stream
starts; a failure after it started is an in-band ``{"error": ...}`` line, and a master that
stops ends a stream with a 503 line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from stalwart.errors import InvalidArgumentError, StalwartError
from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.errors import status_of
from stalwart.master.api.models.common import WireModel
from stalwart.master.api.models.logs import result_line, stream_error_line
from stalwart.master.api.models.metric_views import (
    ExpMetricNamesResponse,
    MetricBatchesResponse,
    SampleTrial,
    TrialsSampleResponse,
    TrialsSnapshotResponse,
)
from stalwart.master.api.trial_series import data_points
from stalwart.master.services import metric_streams as svc
from stalwart.master.services.experiments import get_experiment
from stalwart.master.state import MasterState

__all__ = ["router"]

router = APIRouter(tags=["experiments"])

DEFAULT_PERIOD_S = 30.0
"""Determined's default stream period."""


class _Stream(Protocol):
    def step(self, session: Session) -> tuple[dict[str, Any], bool]: ...


_STOPPING = "the master is stopping; open the stream again once it is back"


async def _lines(
    state: MasterState,
    stream: _Stream,
    render: Callable[[dict[str, Any]], WireModel],
    period: float,
) -> AsyncIterator[bytes]:
    def once() -> tuple[dict[str, Any], bool]:
        with state.sessions() as session:
            return stream.step(session)

    try:
        while True:
            body, done = await run_in_threadpool(once)
            yield result_line(render(body))
            if done:
                return
            deadline = time.monotonic() + period
            while (left := deadline - time.monotonic()) > 0:
                if state.notifier.closed:
                    yield stream_error_line(503, 14, _STOPPING)
                    return
                await asyncio.sleep(min(left, 1.0))
    except StalwartError as exc:
        http, grpc, _ = status_of(exc)
        yield stream_error_line(http, grpc, str(exc))
    except Exception as exc:  # the stream has started: report in-band, then end
        yield stream_error_line(500, 13, f"internal error: {exc}")


def _start(
    state: MasterState,
    session: Session,
    stream: _Stream,
    render: Callable[[dict[str, Any]], WireModel],
    period_seconds: int,
) -> StreamingResponse:
    """Validate by running nothing but checks here; the stream's first step runs in the
    body (so a 400/404 is raised by the caller before this)."""
    session.close()
    period = float(period_seconds) if period_seconds > 0 else DEFAULT_PERIOD_S
    return StreamingResponse(_lines(state, stream, render, period), media_type="application/json")


def _metric(metric_name: str) -> str:
    if not metric_name:
        raise InvalidArgumentError("must specify a metric name (metricName)")
    return metric_name


@router.get("/experiments/metrics-stream/metric-names")
def metric_names(
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    ids: Annotated[list[int] | None, Query()] = None,
    period_seconds: Annotated[int, Query(alias="periodSeconds")] = 0,
) -> StreamingResponse:
    """The metric names of the experiments ``ids`` (each must be visible to the caller)."""
    wanted = sorted(set(ids or []))
    if not wanted:
        raise InvalidArgumentError("must specify at least one experiment id (ids)")
    for experiment_id in wanted:
        policy.require_view_experiment(session, caller.user, get_experiment(session, experiment_id))
    return _start(
        state,
        session,
        svc.NamesStream(wanted),
        lambda body: ExpMetricNamesResponse.model_validate(body),
        period_seconds,
    )


@router.get("/experiments/{experiment_id}/metrics-stream/batches")
def metric_batches(
    experiment_id: int,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    metric_name: Annotated[str, Query(alias="metricName")] = "",
    metric_type: Annotated[str | None, Query(alias="metricType")] = None,
    group: str = "",
    period_seconds: Annotated[int, Query(alias="periodSeconds")] = 0,
) -> StreamingResponse:
    """The batch counts at which the experiment's trials reported the metric."""
    get_experiment(session, experiment_id)
    stream = svc.BatchesStream(
        experiment_id, _metric(metric_name), svc.metric_group(metric_type, group)
    )
    return _start(
        state,
        session,
        stream,
        lambda body: MetricBatchesResponse.model_validate(body),
        period_seconds,
    )


@router.get("/experiments/{experiment_id}/metrics-stream/trials-snapshot")
def trials_snapshot(
    experiment_id: int,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    batches_processed: Annotated[int, Query(alias="batchesProcessed")],
    metric_name: Annotated[str, Query(alias="metricName")] = "",
    metric_type: Annotated[str | None, Query(alias="metricType")] = None,
    group: str = "",
    batches_margin: Annotated[int, Query(alias="batchesMargin")] = 0,
    period_seconds: Annotated[int, Query(alias="periodSeconds")] = 0,
) -> StreamingResponse:
    """Each trial's value of the metric at ``batchesProcessed`` (± ``batchesMargin``, at
    most 100)."""
    get_experiment(session, experiment_id)
    if batches_margin > 100:
        raise InvalidArgumentError("margin must be <= 100")
    stream = svc.SnapshotStream(
        experiment_id,
        _metric(metric_name),
        svc.metric_group(metric_type, group),
        batches=batches_processed,
        margin=batches_margin,
    )
    return _start(
        state,
        session,
        stream,
        lambda body: TrialsSnapshotResponse.model_validate(body),
        period_seconds,
    )


@router.get("/experiments/{experiment_id}/metrics-stream/trials-sample")
def trials_sample(
    experiment_id: int,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    metric_name: Annotated[str, Query(alias="metricName")] = "",
    metric_type: Annotated[str | None, Query(alias="metricType")] = None,
    group: str = "",
    max_trials: Annotated[int, Query(alias="maxTrials")] = 0,
    max_datapoints: Annotated[int, Query(alias="maxDatapoints")] = 0,
    start_batches: Annotated[int, Query(alias="startBatches")] = 0,
    end_batches: Annotated[int, Query(alias="endBatches")] = 0,
    period_seconds: Annotated[int, Query(alias="periodSeconds")] = 0,
) -> StreamingResponse:
    """The curves of the experiment's best trials (``maxTrials`` 0: 25; ``maxDatapoints``
    0: 1000 per trial; ``endBatches`` 0: no end)."""
    get_experiment(session, experiment_id)
    stream = svc.SampleStream(
        experiment_id,
        _metric(metric_name),
        svc.metric_group(metric_type, group),
        max_trials=max_trials or 25,
        max_points=max_datapoints or 1000,
        start_batches=start_batches,
        end_batches=end_batches,
    )

    def render(body: dict[str, Any]) -> WireModel:
        return TrialsSampleResponse(
            trials=[
                SampleTrial(
                    trial_id=t["trial_id"], hparams=t["hparams"], data=data_points(t["data"])
                )
                for t in body["trials"]
            ],
            promoted_trials=body["promoted_trials"],
            demoted_trials=body["demoted_trials"],
        )

    return _start(state, session, stream, render, period_seconds)
