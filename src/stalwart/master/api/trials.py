"""Routes: trials, their workloads and metrics, and the run calls of the Core API (wire doc 5.5).

Task callers authenticate with their allocation token; user tokens work as well.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Annotated, Any, TypeVar

import pydantic_core
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from stalwart.errors import InvalidArgumentError, PayloadTooLargeError
from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep, get_caller
from stalwart.master.api.models.common import Empty, WireRequest, wire_time
from stalwart.master.api.models.trials import (
    CheckpointWorkload,
    GetTrialResponse,
    GetTrialWorkloadsResponse,
    MetricSeriesPoint,
    MetricSeriesResponse,
    MetricsReport,
    MetricsWorkload,
    ReportTrialMetricsBatchRequest,
    ReportTrialMetricsRequest,
    ReportTrialProgressRequest,
    ReportTrialSourceInfoRequest,
    ReportTrialSourceInfoResponse,
    RunMetadataRequest,
    RunMetadataResponse,
    RunPrepareRequest,
    RunPrepareResponse,
    TrialEarlyExitRequest,
    TrialRunnerMetadataRequest,
    V1Metrics,
    V1Trial,
    WorkloadContainer,
    WorkloadFilter,
)
from stalwart.master.api.models.users import OrderBy
from stalwart.master.cluster.search import validations_wake_searcher
from stalwart.master.db.tables import Checkpoint, MetricReport
from stalwart.master.services import experiments as state_actions
from stalwart.master.services import metric_tables
from stalwart.master.services import metrics as metrics_svc
from stalwart.master.services import trials as svc
from stalwart.master.state import MasterState

__all__ = ["arrow_response", "metrics_report_to_wire", "router", "trial_to_wire"]

router = APIRouter(tags=["trials"])

M = TypeVar("M", bound=WireRequest)


# --- wire conversion ------------------------------------------------------------------------


def _metrics_workload(report: MetricReport, *, batch_metrics: bool = False) -> MetricsWorkload:
    return MetricsWorkload(
        metrics=V1Metrics(
            avg_metrics=report.metrics or {},
            batch_metrics=report.batch_metrics if batch_metrics else None,
        ),
        total_batches=report.steps_completed,
        end_time=wire_time(report.report_time),
    )


def _checkpoint_workload(ckpt: Checkpoint) -> CheckpointWorkload:
    steps = ckpt.steps_completed
    if steps is None:
        steps = int((ckpt.metadata_ or {}).get("steps_completed") or 0)
    return CheckpointWorkload(
        uuid=ckpt.uuid,
        state=f"STATE_{ckpt.state}",
        total_batches=steps,
        end_time=wire_time(ckpt.report_time),
        resources={str(k): str(v) for k, v in (ckpt.resources or {}).items()},
        metadata=ckpt.metadata_ or {},
    )


def metrics_report_to_wire(report: MetricReport) -> MetricsReport:
    """``v1MetricsReport`` of a stored report, in Determined's stored shape (see
    :class:`MetricsReport`)."""
    if report.group == metrics_svc.VALIDATION:
        body: dict[str, Any] = {"validation_metrics": report.metrics or {}}
    else:
        body = {"avg_metrics": report.metrics or {}, "batch_metrics": report.batch_metrics}
    return MetricsReport(
        id=report.id,
        trial_id=report.trial_id,
        trial_run_id=report.trial_run_id,
        group=report.group,
        total_batches=report.steps_completed,
        end_time=wire_time(report.report_time) or "",
        archived=report.archived,
        metrics=body,
    )


def trial_to_wire(view: svc.TrialView) -> V1Trial:
    """The wire form of a trial view."""
    t = view.trial
    return V1Trial(
        id=t.id,
        experiment_id=t.experiment_id,
        hparams=t.hparams or {},
        restarts=t.restarts,
        start_time=wire_time(t.start_time) or "",
        state=f"STATE_{view.state}",
        total_batches_processed=t.total_batches,
        end_time=wire_time(t.end_time),
        task_id=t.task_id,
        task_ids=[t.task_id],
        latest_validation=(
            _metrics_workload(view.latest_validation) if view.latest_validation else None
        ),
        best_validation=_metrics_workload(view.best_validation) if view.best_validation else None,
        runner_state=t.runner_state,
        wall_clock_time=view.wall_clock_time,
        searcher_metric_value=t.searcher_metric_value,
        checkpoint_count=view.checkpoint_count,
        total_checkpoint_size=str(view.checkpoint_size),
        metadata=t.run_metadata,
        summary_metrics=view.summary_metrics,
        warm_start_checkpoint_uuid=t.warm_start_checkpoint,
        log_policy_matched=view.log_policy_matched,
    )


# --- metric streams (static paths first: they would otherwise match /trials/{trial_id}) ------


def _wire_time_of(raw: str | dt.datetime) -> str:
    """:func:`wire_time` of a ``report_time`` as the driver answers it, without building a
    datetime for SQLite's stored text (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC)."""
    if isinstance(raw, str):
        if len(raw) == 26 and raw[10] == " " and raw[19] == ".":
            fraction = "" if raw.endswith(".000000") else raw[19:]  # as isoformat() drops it
            return f"{raw[:10]}T{raw[11:19]}{fraction}Z"
        parsed = dt.datetime.fromisoformat(raw)
        raw = parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed
    return wire_time(raw) or ""


def _spliceable(text: str) -> bool:
    """Whether stored JSON text can go into an NDJSON line as it is: one line, and no
    non-finite number (stored values hold them as the strings "NaN"/"Infinity"; a text that
    mentions them at all takes the decoding path, which writes exactly what it always did)."""
    return "\n" not in text and "\r" not in text and "NaN" not in text and "Infinity" not in text


def _json_text(text: str | None, empty: str) -> str:
    """The stored JSON text of a metrics column as it goes on the wire (``empty`` for null)."""
    if text is None or text == "null":
        return empty
    if _spliceable(text):
        return text
    value = json.loads(text)  # the old path: decode, encode as the wire models do
    if value is None or (not value and empty == "{}"):
        return empty
    return pydantic_core.to_json(value, inf_nan_mode="strings").decode()


def _stream_line(group: str, rows: list[metrics_svc.ReportRow]) -> bytes:
    """One NDJSON line: ``{"result":{"metrics":[v1MetricsReport...]}}``, written directly.

    Byte for byte what ``MetricsReportsResponse(...).model_dump_json(by_alias=True)`` wrote
    (field order, no spaces, ``"archived":false`` as only live reports are streamed), except
    that each report's metrics are the stored JSON text spliced in rather than decoded and
    encoded again: the same JSON values, with the stored text's spacing (:func:`_json_text`).
    """
    group_json = pydantic_core.to_json(group).decode()
    validation = group == metrics_svc.VALIDATION
    parts = []
    for report_id, trial_id, run_id, steps, when, metrics, batch_metrics in rows:
        head = (
            f'{{"id":{report_id},"trialId":{trial_id},"trialRunId":{run_id},'
            f'"group":{group_json},"totalBatches":{steps},'
            f'"endTime":"{_wire_time_of(when)}","archived":false,'
        )
        avg = _json_text(metrics, "{}")
        if validation:
            parts.append(f'{head}"metrics":{{"validation_metrics":{avg}}}}}')
        else:
            batches = _json_text(batch_metrics, "null")
            parts.append(f'{head}"metrics":{{"avg_metrics":{avg},"batch_metrics":{batches}}}}}')
    return ('{"result":{"metrics":[' + ",".join(parts) + "]}}\n").encode()


def _stream(
    state: MasterState, session: Session, trial_ids: list[int], group: str
) -> StreamingResponse:
    """NDJSON ``{"result": {"metrics": [...]}}`` lines, one per batch of reports (each batch
    read in its own short session: the request's session is closed before the body is sent).

    Plain columns are read and each line is written directly (:func:`_stream_line`): no ORM
    object, no decoded JSON and no pydantic model per report."""
    if not group:
        raise InvalidArgumentError("group is required (training, validation, or a custom one)")
    metrics_svc.require_trials(session, trial_ids)
    sessions = state.sessions

    def lines() -> Iterator[bytes]:
        for batch in metrics_svc.iter_report_rows(sessions, trial_ids, group):
            yield _stream_line(group, batch)

    return StreamingResponse(lines(), media_type="application/json")


TrialIdsQuery = Annotated[list[int], Query(alias="trialIds")]


@router.get("/trials/metrics/trial_metrics")
def get_metrics(
    trial_ids: TrialIdsQuery, group: str, _caller: CallerDep, session: SessionDep, state: StateDep
) -> StreamingResponse:
    """Stream the trials' reports of one metrics group (``trial.iter_metrics`` in the SDK)."""
    return _stream(state, session, trial_ids, group)


@router.get(
    "/trials/metrics/arrow",
    response_class=Response,
    responses={200: {"content": {metric_tables.ARROW_STREAM: {}}}},
)
def get_metrics_arrow(
    trial_ids: TrialIdsQuery, group: str, _caller: CallerDep, session: SessionDep, state: StateDep
) -> Response:
    """The trials' reports of one group as an Apache Arrow IPC stream: one row per report, one
    column per metric (Stalwart's columnar export; the SDK's ``metrics_dataframe``)."""
    return arrow_response(state, session, trial_ids, group)


def arrow_response(
    state: MasterState, session: Session, trial_ids: list[int], group: str
) -> Response:
    """:func:`metric_tables.metrics_table` of the trials as an Arrow IPC stream answer."""
    if not group:
        raise InvalidArgumentError("group is required (training, validation, or a custom one)")
    metrics_svc.require_trials(session, trial_ids)
    session.close()  # the table is read in short sessions of its own
    table = metric_tables.metrics_table(state.sessions, trial_ids, group)
    return Response(metric_tables.ipc_stream(table), media_type=metric_tables.ARROW_STREAM)


@router.get("/trials/metrics/training_metrics")
def get_training_metrics(
    trial_ids: TrialIdsQuery, _caller: CallerDep, session: SessionDep, state: StateDep
) -> StreamingResponse:
    """Stream the trials' training reports (legacy)."""
    return _stream(state, session, trial_ids, metrics_svc.TRAINING)


@router.get("/trials/metrics/validation_metrics")
def get_validation_metrics(
    trial_ids: TrialIdsQuery, _caller: CallerDep, session: SessionDep, state: StateDep
) -> StreamingResponse:
    """Stream the trials' validation reports (legacy)."""
    return _stream(state, session, trial_ids, metrics_svc.VALIDATION)


# --- trials ---------------------------------------------------------------------------------


@router.get("/trials/{trial_id}", response_model=GetTrialResponse)
def get_trial(trial_id: int, _caller: CallerDep, session: SessionDep) -> GetTrialResponse:
    """One trial, with its latest and best validation."""
    view = svc.trial_views(session, [svc.get_trial(session, trial_id)])[0]
    return GetTrialResponse(trial=trial_to_wire(view))


@router.post("/trials/{trial_id}/kill", response_model=Empty)
def kill_trial(trial_id: int, _caller: CallerDep, session: SessionDep, state: StateDep) -> Empty:
    """Kill one trial (a no-op when it already ended)."""
    with state.lifecycle:
        signals = state_actions.kill_trial(session, trial_id)
    state_actions.deliver(state.notifier, signals)
    state.hints.poke()
    return Empty()


@router.get("/trials/{trial_id}/workloads", response_model=GetTrialWorkloadsResponse)
def get_workloads(
    trial_id: int,
    _caller: CallerDep,
    session: SessionDep,
    offset: int = 0,
    limit: int = 0,
    order_by: Annotated[OrderBy, Query(alias="orderBy")] = OrderBy.UNSPECIFIED,
    filter_option: Annotated[WorkloadFilter, Query(alias="filter")] = WorkloadFilter.UNSPECIFIED,
    group: str | None = None,
    include_batch_metrics: Annotated[bool, Query(alias="includeBatchMetrics")] = False,
) -> GetTrialWorkloadsResponse:
    """Training, validation and checkpoint workloads in totalBatches order, paged."""
    page = svc.trial_workloads(
        session,
        trial_id,
        offset=offset,
        limit=limit,
        order_desc=order_by is OrderBy.DESC,
        filter_option=filter_option.value,
        group=group,
    )
    containers = []
    for w in page.items:
        if w.checkpoint is not None:
            containers.append(WorkloadContainer(checkpoint=_checkpoint_workload(w.checkpoint)))
        elif w.report is not None and w.kind == metrics_svc.VALIDATION:
            containers.append(WorkloadContainer(validation=_metrics_workload(w.report)))
        elif w.report is not None:
            workload = _metrics_workload(w.report, batch_metrics=include_batch_metrics)
            containers.append(WorkloadContainer(training=workload))
    return GetTrialWorkloadsResponse(workloads=containers, pagination=page.pagination)


def _parse(model: type[M], raw: bytes) -> M:
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" if err["loc"] else err["msg"]
            for err in exc.errors()
        ]
        raise InvalidArgumentError("invalid request: " + "; ".join(problems)) from None


def _ingest(state: MasterState, request: Request, trial_id: int | None, raw: bytes) -> None:
    """Authenticate, validate and store reports: all of it in one worker-thread hop.

    The caller is authenticated first (no token: 401 whatever the body); a task's token may
    report only its own trial (:func:`stalwart.master.policy.require_own_trials`), a user
    only to trials they may change."""
    with state.sessions() as session:
        caller = get_caller(request, session)
        if trial_id is None:
            batch = _parse(ReportTrialMetricsBatchRequest, raw)
            inputs = [metrics_svc.wire_input(report) for report in batch.reports]
        else:
            inputs = [metrics_svc.wire_input(_parse(ReportTrialMetricsRequest, raw))]
            if inputs[0].trial_id != trial_id:
                raise InvalidArgumentError(
                    f"the report names trial {inputs[0].trial_id} but was posted to trial "
                    f"{trial_id}"
                )
        policy.authorize_reports(
            session, caller.user, caller.allocation_id, {i.trial_id for i in inputs}
        )
        results = metrics_svc.report_metrics_many(session, inputs)  # stored once, even if resent
        validated = {r.experiment_id for r in results if r.group == metrics_svc.VALIDATION}
        woken = [
            e
            for e in sorted(validated)
            if validations_wake_searcher(session, e, state.validation_wakes)
        ]
    for experiment_id in woken:
        state.hints.experiment(experiment_id)


async def _read_report(request: Request) -> tuple[MasterState, bytes]:
    state: MasterState = request.app.state.master
    raw = await request.body()
    limit = state.settings.limits.max_metrics_report_bytes
    if len(raw) > limit:
        raise PayloadTooLargeError(
            f"metrics report of {len(raw)} bytes is over the master's limit of {limit} bytes "
            "(limits.max_metrics_report_bytes): report fewer or smaller metrics"
        )
    return state, raw


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/X"}`` replaced by ``X`` (the models have no
    cycles): an ``openapi_extra`` schema cannot point at its own ``$defs``."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def _body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """The request body's schema for the OpenAPI description of a route that reads raw bytes."""
    raw = model.model_json_schema(by_alias=True)
    schema = _inline_refs(raw, raw.get("$defs", {}))
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


_EMPTY = b"{}"


@router.post(
    "/trials/metrics/batch",
    response_model=Empty,
    openapi_extra=_body_doc(ReportTrialMetricsBatchRequest),
)
async def report_metrics_batch(request: Request) -> Response:
    """Store many reports in one transaction, all or none (a Stalwart extension for shippers
    that batch; the whole body is held to ``limits.max_metrics_report_bytes``)."""
    state, raw = await _read_report(request)
    await run_in_threadpool(_ingest, state, request, None, raw)
    return Response(_EMPTY, media_type="application/json")


@router.post(
    "/trials/{trial_id}/metrics",
    response_model=Empty,
    openapi_extra=_body_doc(ReportTrialMetricsRequest),
)
async def report_metrics(trial_id: int, request: Request) -> Response:
    """Store one metrics report (the harness's ``report_*_metrics``; body: wire doc 5.5).

    The hot path: the body is read and size-checked on the event loop; authentication,
    validation and the one short transaction run in a single worker-thread hop.
    """
    state, raw = await _read_report(request)
    await run_in_threadpool(_ingest, state, request, trial_id, raw)
    return Response(_EMPTY, media_type="application/json")


@router.get("/trials/{trial_id}/metrics/series", response_model=MetricSeriesResponse)
def get_metric_series(
    trial_id: int,
    metric: str,
    _caller: CallerDep,
    session: SessionDep,
    group: str = metrics_svc.TRAINING,
    max_points: Annotated[int, Query(alias="maxPoints")] = 1000,
    start_batches: Annotated[int | None, Query(alias="startBatches")] = None,
    end_batches: Annotated[int | None, Query(alias="endBatches")] = None,
) -> MetricSeriesResponse:
    """One metric of one trial over batches, downsampled to maxPoints (Stalwart extension)."""
    total, points = metrics_svc.metric_series(
        session,
        trial_id,
        group=group,
        metric=metric,
        max_points=max_points,
        start_batches=start_batches,
        end_batches=end_batches,
    )
    return MetricSeriesResponse(
        trial_id=trial_id,
        group=group,
        metric=metric,
        total=total,
        points=[
            MetricSeriesPoint(batches=p.batches, value=p.value, time=wire_time(p.time))
            for p in points
        ],
    )


@router.post("/trials/{trial_id}/progress", response_model=Empty)
def report_progress(
    trial_id: int, body: ReportTrialProgressRequest, _caller: CallerDep, session: SessionDep
) -> Empty:
    """The trial's progress (0..1); the experiment's progress follows."""
    svc.report_progress(session, trial_id, body.progress)
    return Empty()


@router.post("/trials/{trial_id}/early_exit", response_model=Empty)
def report_early_exit(
    trial_id: int, body: TrialEarlyExitRequest, _caller: CallerDep, session: SessionDep
) -> Empty:
    """The trial exits early (invalid hyperparameters); a second report is a 400."""
    svc.report_early_exit(session, trial_id, body.reason)
    return Empty()


@router.post("/trials/{trial_id}/runner/metadata", response_model=Empty)
def set_runner_metadata(
    trial_id: int, body: TrialRunnerMetadataRequest, _caller: CallerDep, session: SessionDep
) -> Empty:
    """What the trial says it is doing (``runnerState``)."""
    svc.set_runner_state(session, trial_id, body.state)
    return Empty()


@router.post("/trial-source-info", response_model=ReportTrialSourceInfoResponse)
def report_trial_source_info(
    body: ReportTrialSourceInfoRequest, caller: CallerDep, session: SessionDep
) -> ReportTrialSourceInfoResponse:
    """``ReportTrialSourceInfo`` (``core_context.experimental.report_task_using_checkpoint``
    / ``_model_version``): record that a trial used a checkpoint (and model version). The
    caller must be allowed to change the trial (a task: only its own); the trial and the
    checkpoint must exist (404). Reporting the same (trial, checkpoint) again replaces its
    type and model version."""
    info = body.trial_source_info
    svc.get_trial(session, info.trial_id)
    policy.authorize_reports(session, caller.user, caller.allocation_id, {info.trial_id})
    svc.record_trial_source(
        session,
        trial_id=info.trial_id,
        checkpoint_uuid=info.checkpoint_uuid,
        source_type=info.trial_source_info_type,
        model_id=info.model_id,
        model_version=info.model_version,
    )
    session.commit()
    return ReportTrialSourceInfoResponse(
        checkpoint_uuid=info.checkpoint_uuid, trial_id=info.trial_id
    )


# --- runs (a run is a trial in 0.38) --------------------------------------------------------


@router.post("/runs/start", response_model=RunPrepareResponse)
def run_prepare(
    body: RunPrepareRequest, caller: CallerDep, session: SessionDep
) -> RunPrepareResponse:
    """``core.init()``: register the checkpoint storage the run uses; answer its storageId.
    A task's token may name only its own trial."""
    policy.authorize_reports(session, caller.user, caller.allocation_id, {body.run_id})
    storage = body.checkpoint_storage
    return RunPrepareResponse(storage_id=svc.add_storage_backend(session, body.run_id, storage))


@router.post("/runs/{run_id}/metadata", response_model=RunMetadataResponse)
def post_run_metadata(
    run_id: int, body: RunMetadataRequest, _caller: CallerDep, session: SessionDep
) -> RunMetadataResponse:
    """Merge metadata into the run's; answer the result."""
    return RunMetadataResponse(metadata=svc.post_run_metadata(session, run_id, body.metadata))


@router.get("/runs/{run_id}/metadata", response_model=RunMetadataResponse)
def get_run_metadata(run_id: int, _caller: CallerDep, session: SessionDep) -> RunMetadataResponse:
    """The run's metadata (``{}`` when none was set)."""
    return RunMetadataResponse(metadata=svc.get_run_metadata(session, run_id))
