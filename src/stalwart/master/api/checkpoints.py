"""Routes: checkpoints (report, describe, list, delete, patch, metadata; wire doc 4.3, 5.5)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field, ValidationError

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.checkpoints import (
    CheckpointsResponse,
    DeleteCheckpointsRequest,
    GetCheckpointResponse,
    PatchCheckpointsRequest,
    PostCheckpointMetadataRequest,
    ReportCheckpointRequest,
)
from stalwart.master.api.models.common import Empty, WireRequest, paginate
from stalwart.master.api.models.trials import MetricsReportsResponse
from stalwart.master.api.trials import metrics_report_to_wire
from stalwart.master.api.wire.checkpoints import checkpoint_to_wire
from stalwart.master.db.tables import Experiment, Trial
from stalwart.master.services import checkpoint_files as tensorboard_files
from stalwart.master.services import checkpoints as service
from stalwart.master.services import trials as trial_svc
from stalwart.master.services.checkpoint_files import check_globs, remove_files
from stalwart.master.services.models import refuse_registered

__all__ = ["router"]

router = APIRouter(tags=["checkpoints"])
log = logging.getLogger("stalwart.master")

StatesQuery = Annotated[list[str] | None, Query()]
SortByQuery = Annotated[str | None, Query(alias="sortByAttr")]
SortMetricQuery = Annotated[str | None, Query(alias="sortByMetric")]
OrderByQuery = Annotated[str | None, Query(alias="orderBy")]


@router.post("/checkpoints", response_model=Empty)
def report_checkpoint(
    body: ReportCheckpointRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """A task reports a checkpoint it saved (idempotent on ``uuid``). A user reporting one
    needs change rights on the task it names (it may become the trial's resume point)."""
    if caller.allocation_id is None and body.task_id:
        policy.require_change_tasks(session, caller.user, [body.task_id])
    report = service.CheckpointReport(
        uuid=body.uuid,
        metadata=body.metadata or {},
        resources=body.resources or {},
        state=body.state,
        task_id=body.task_id,
        allocation_id=body.allocation_id,
        report_time=body.report_time,
        storage_id=body.storage_id,
    )
    service.report_checkpoint(session, report, caller_allocation_id=caller.allocation_id)
    session.commit()
    return Empty()


@router.get("/checkpoints/{uuid}/metrics", response_model=MetricsReportsResponse)
def get_checkpoint_metrics(
    uuid: str,
    caller: CallerDep,
    session: SessionDep,
    metric_group: Annotated[str | None, Query(alias="metricGroup")] = None,
    source_type: Annotated[str | None, Query(alias="trialSourceInfoType")] = None,
) -> MetricsReportsResponse:
    """``GetTrialMetricsByCheckpoint`` (the SDK's ``Checkpoint.get_metrics``): the reports of
    the trials that said they used this checkpoint (``POST /api/v1/trial-source-info``), of
    one ``metricGroup`` or all; 404 for an unknown checkpoint."""
    service.get_checkpoint(session, uuid)
    reports = trial_svc.trial_source_metrics(
        session, caller.user, checkpoint_uuid=uuid, source_type=source_type, group=metric_group
    )
    return MetricsReportsResponse(metrics=[metrics_report_to_wire(r) for r in reports])


@router.get("/checkpoints/{uuid}", response_model=GetCheckpointResponse)
def get_checkpoint(uuid: str, _caller: CallerDep, session: SessionDep) -> GetCheckpointResponse:
    """One checkpoint with its training facts (404 if unknown)."""
    ckpt = service.get_checkpoint(session, uuid)
    return GetCheckpointResponse(
        checkpoint=checkpoint_to_wire(service.build_views(session, [ckpt])[0])
    )


async def _delete_body(request: Request) -> DeleteCheckpointsRequest:
    """The DELETE body, read as JSON whatever its Content-Type (the official client sends
    none, and only POST, PUT and PATCH bodies are relabelled by the wire middleware)."""
    raw = await request.body()
    try:
        return DeleteCheckpointsRequest.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise InvalidArgumentError(f"invalid request: {exc.errors()[0]['msg']}") from exc


@router.delete("/checkpoints", response_model=Empty)
def delete_checkpoints(
    body: Annotated[DeleteCheckpointsRequest, Depends(_delete_body)],
    caller: CallerDep,
    session: SessionDep,
) -> Empty:
    """Mark checkpoints DELETED. Their files stay in storage until the checkpoint-GC task
    (a later issue) removes them. Checkpoints registered in the model registry are refused."""
    if caller.allocation_id is None:
        policy.require_change_checkpoints(session, caller.user, body.checkpoint_uuids)
    refuse_registered(session, caller.user, body.checkpoint_uuids, "deleted")
    service.delete_checkpoints(
        session, body.checkpoint_uuids, caller_allocation_id=caller.allocation_id
    )
    session.commit()
    return Empty()


@router.patch("/checkpoints", response_model=Empty)
def patch_checkpoints(
    body: PatchCheckpointsRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """Record the files left after a (partial) deletion; ``Checkpoint.delete`` in the Core
    API and checkpoint GC send it. An empty resources map means DELETED."""
    if caller.allocation_id is None:
        policy.require_change_checkpoints(session, caller.user, [p.uuid for p in body.checkpoints])
    changed = [p.uuid for p in body.checkpoints if p.resources is not None]
    refuse_registered(session, caller.user, changed, "patched")
    for patch in body.checkpoints:
        service.patch_checkpoint_resources(
            session,
            patch.uuid,
            patch.resources.resources if patch.resources is not None else None,
            caller_allocation_id=caller.allocation_id,
        )
    session.commit()
    return Empty()


@router.post("/checkpoints/{uuid}/metadata", response_model=GetCheckpointResponse)
def post_checkpoint_metadata(
    uuid: str, body: PostCheckpointMetadataRequest, caller: CallerDep, session: SessionDep
) -> GetCheckpointResponse:
    """Replace a checkpoint's metadata (the SDK's ``add_metadata`` / ``remove_metadata``)."""
    ckpt = service.set_checkpoint_metadata(
        session, uuid, body.checkpoint.metadata or {}, caller_allocation_id=caller.allocation_id
    )
    session.commit()
    return GetCheckpointResponse(
        checkpoint=checkpoint_to_wire(service.build_views(session, [ckpt])[0])
    )


@dataclass(frozen=True)
class _ListQuery:
    """The query of a checkpoints listing: states, sort and page."""

    sort_by: str | None
    sort_metric: str | None
    order_by: str | None
    states: list[str] | None
    offset: int
    limit: int


def _list_query(
    sort_by: SortByQuery = None,
    sort_metric: SortMetricQuery = None,
    order_by: OrderByQuery = None,
    states: StatesQuery = None,
    offset: int = 0,
    limit: int = 0,
) -> _ListQuery:
    return _ListQuery(sort_by, sort_metric, order_by, states, offset, limit)


ListQuery = Annotated[_ListQuery, Depends(_list_query)]


def _listing(
    session: SessionDep,
    query: _ListQuery,
    *,
    experiment_id: int | None = None,
    trial_id: int | None = None,
) -> CheckpointsResponse:
    """The checkpoints of an experiment or a trial, filtered by states, sorted, one page."""
    views = service.sorted_checkpoints(
        session,
        experiment_id=experiment_id,
        trial_id=trial_id,
        states=query.states or (),
        sort_by=query.sort_by,
        sort_metric=query.sort_metric,
        order_by=query.order_by,
    )
    start, end, pagination = paginate(len(views), query.offset, query.limit)
    return CheckpointsResponse(
        checkpoints=[checkpoint_to_wire(v) for v in views[start:end]], pagination=pagination
    )


@router.get("/experiments/{experiment_id}/checkpoints", response_model=CheckpointsResponse)
def get_experiment_checkpoints(
    experiment_id: int, _caller: CallerDep, session: SessionDep, query: ListQuery
) -> CheckpointsResponse:
    """An experiment's checkpoints, filtered by ``states``, sorted and paginated."""
    if session.get(Experiment, experiment_id) is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    return _listing(session, query, experiment_id=experiment_id)


@router.get("/trials/{trial_id}/checkpoints", response_model=CheckpointsResponse)
def get_trial_checkpoints(
    trial_id: int, _caller: CallerDep, session: SessionDep, query: ListQuery
) -> CheckpointsResponse:
    """A trial's checkpoints, filtered by ``states``, sorted and paginated."""
    if session.get(Trial, trial_id) is None:
        raise NotFoundError(f"trial {trial_id} not found")
    return _listing(session, query, trial_id=trial_id)


class RemoveFilesRequest(WireRequest):
    """``v1CheckpointsRemoveFilesRequest``."""

    checkpoint_globs: list[str] = Field(default_factory=list, description="Files to delete.")
    checkpoint_uuids: list[str] = Field(default_factory=list, description="From these.")


@router.post("/checkpoints/rm", response_model=Empty)
def remove_checkpoint_files(
    body: RemoveFilesRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """Delete the files matching the globs from the checkpoints in storage and record what is
    left (DELETED when nothing is); no globs refreshes the records from storage. Registered
    checkpoints are refused, as deleting them is. Done when the call returns."""
    policy.require_change_checkpoints(session, caller.user, body.checkpoint_uuids)
    check_globs(body.checkpoint_globs)
    refuse_registered(session, caller.user, body.checkpoint_uuids, "deleted")
    session.commit()  # the registry's row locks are not held while storage is worked on
    remove_files(
        session,
        body.checkpoint_uuids,
        body.checkpoint_globs,
        default_storage=state.settings.default_checkpoint_storage,
    )
    return Empty()


@router.delete("/experiments/{experiment_id}/tensorboard-files", response_model=Empty)
def delete_tensorboard_files(
    experiment_id: int, _caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """Remove the experiment's TensorBoard files from its checkpoint storage (the SDK's
    ``Experiment.delete_tensorboard_files``); checkpoints are untouched."""
    removed = tensorboard_files.delete_tensorboard_files(
        session,
        experiment_id,
        state.cluster_id,
        default_storage=state.settings.default_checkpoint_storage,
    )
    log.info("experiment %s: deleted %d TensorBoard files", experiment_id, removed)
    return Empty()
