"""Routes: the model registry (``/api/v1/models``, ``/api/v1/model/labels``).

``{model_name}`` is a model's name, or its id when only digits (the official client uses both:
``det model register-version --json`` posts to ``/models/{id}/versions``). Logic and rules are
in :mod:`stalwart.master.services.models`; every answer is 200.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy.orm import Session

from stalwart.master.api.deps import Caller, CallerDep, SessionDep
from stalwart.master.api.models.common import Empty, paginate
from stalwart.master.api.models.model_registry import (
    GetModelLabelsResponse,
    GetModelResponse,
    GetModelsResponse,
    GetModelVersionResponse,
    GetModelVersionsResponse,
    MoveModelRequest,
    PatchModelRequest,
    PatchModelVersionRequest,
    PostModelRequest,
    PostModelVersionRequest,
)
from stalwart.master.api.models.trials import MetricsReportsResponse
from stalwart.master.api.trials import metrics_report_to_wire
from stalwart.master.api.wire.model_registry import models_to_wire, versions_to_wire
from stalwart.master.db.tables import Model, ModelVersion
from stalwart.master.services import models as service
from stalwart.master.services import trials as trial_svc

__all__ = ["router"]

router = APIRouter(tags=["models"])

IntList = Annotated[list[int] | None, Query()]
StrList = Annotated[list[str] | None, Query()]


@router.get("/models", response_model=GetModelsResponse)
def get_models(
    caller: CallerDep,
    session: SessionDep,
    archived: bool | None = None,
    description: str | None = None,
    id: int | None = None,
    labels: StrList = None,
    name: str | None = None,
    users: StrList = None,
    user_ids: Annotated[list[int] | None, Query(alias="userIds")] = None,
    workspace_ids: Annotated[list[int] | None, Query(alias="workspaceIds")] = None,
    workspace_names: Annotated[list[str] | None, Query(alias="workspaceNames")] = None,
    sort_by: Annotated[str | None, Query(alias="sortBy")] = None,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
    offset: int = 0,
    limit: Annotated[int, Query(ge=0)] = 0,
) -> GetModelsResponse:
    """The models the caller may see, filtered, sorted and paginated."""
    filters = service.ModelFilters(
        model_id=id,
        name=name,
        description=description,
        archived=archived,
        labels=labels or (),
        users=users or (),
        user_ids=user_ids or (),
        workspace_ids=workspace_ids,
        workspace_names=workspace_names,
    )
    found = service.list_models(session, caller.user, filters, sort_by=sort_by, order_by=order_by)
    start, end, page = paginate(len(found), offset, limit)
    return GetModelsResponse(models=models_to_wire(session, found[start:end]), pagination=page)


@router.post("/models", response_model=GetModelResponse)
def post_model(body: PostModelRequest, caller: CallerDep, session: SessionDep) -> GetModelResponse:
    """Create a model (``det model create``, ``client.create_model``)."""
    model = service.create_model(
        session,
        caller.user,
        body.name,
        description=body.description,
        notes=body.notes,
        metadata=body.metadata,
        labels=body.labels,
        workspace_id=body.workspace_id,
        workspace_name=body.workspace_name,
    )
    session.commit()
    return GetModelResponse(model=models_to_wire(session, [model])[0])


@router.get("/model/labels", response_model=GetModelLabelsResponse)
def get_model_labels(
    caller: CallerDep,
    session: SessionDep,
    workspace_id: Annotated[int | None, Query(alias="workspaceId")] = None,
) -> GetModelLabelsResponse:
    """Labels of the models the caller may see, most used first."""
    return GetModelLabelsResponse(labels=service.label_counts(session, caller.user, workspace_id))


@router.get("/models/{model_name}", response_model=GetModelResponse)
def get_model(model_name: str, caller: CallerDep, session: SessionDep) -> GetModelResponse:
    """One model, by name or id (404 when unknown or not visible to the caller)."""
    model = service.find_model(session, caller.user, model_name)
    return GetModelResponse(model=models_to_wire(session, [model])[0])


@router.patch("/models/{model_name}", response_model=GetModelResponse)
def patch_model(
    model_name: str, body: PatchModelRequest, caller: CallerDep, session: SessionDep
) -> GetModelResponse:
    """Change a model's name, description, notes, metadata, labels or workspace."""
    model = service.find_model(session, caller.user, model_name)
    patch = service.ModelPatch(
        name=body.name,
        description=body.description,
        notes=body.notes,
        metadata=body.metadata,
        labels=body.labels,
        workspace_id=body.workspace_id,
        workspace_name=body.workspace_name,
    )
    service.patch_model(session, caller.user, model, patch)
    session.commit()
    return GetModelResponse(model=models_to_wire(session, [model])[0])


@router.delete("/models/{model_name}", response_model=Empty)
def delete_model(model_name: str, caller: CallerDep, session: SessionDep) -> Empty:
    """Delete a model and its versions."""
    model = service.find_model(session, caller.user, model_name)
    service.delete_model(session, caller.user, model)
    session.commit()
    return Empty()


def _set_archived(model_name: str, caller: Caller, session: Session, *, archived: bool) -> Empty:
    model = service.find_model(session, caller.user, model_name)
    service.archive_model(session, caller.user, model, archived=archived)
    session.commit()
    return Empty()


@router.post("/models/{model_name}/archive", response_model=Empty)
def archive_model(model_name: str, caller: CallerDep, session: SessionDep) -> Empty:
    """Archive a model: no changes or new versions until it is unarchived."""
    return _set_archived(model_name, caller, session, archived=True)


@router.post("/models/{model_name}/unarchive", response_model=Empty)
def unarchive_model(model_name: str, caller: CallerDep, session: SessionDep) -> Empty:
    """Unarchive a model."""
    return _set_archived(model_name, caller, session, archived=False)


@router.post("/models/{model_name}/move", response_model=Empty)
def move_model(
    model_name: str, body: MoveModelRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """Move a model to another workspace."""
    model = service.find_model(session, caller.user, model_name)
    service.move_model(session, caller.user, model, body.destination_workspace_id)
    session.commit()
    return Empty()


def _version_fields(
    body: PostModelVersionRequest | PatchModelVersionRequest,
) -> service.VersionFields:
    return service.VersionFields(
        name=body.name,
        comment=body.comment,
        notes=body.notes,
        metadata=body.metadata,
        labels=body.labels,
    )


def _find_version(
    session: Session, caller: Caller, model_name: str, version_num: int
) -> tuple[Model, ModelVersion]:
    """The model as named in the path and its version ``version_num`` (404 naming the model
    as asked)."""
    model = service.find_model(session, caller.user, model_name)
    return model, service.get_version(session, model, version_num, shown=model_name)


def _version_answer(
    session: Session, model: Model, version: ModelVersion
) -> GetModelVersionResponse:
    return GetModelVersionResponse(model_version=versions_to_wire(session, model, [version])[0])


@router.get("/models/{model_name}/versions", response_model=GetModelVersionsResponse)
def get_model_versions(
    model_name: str,
    caller: CallerDep,
    session: SessionDep,
    sort_by: Annotated[str | None, Query(alias="sortBy")] = None,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
    offset: int = 0,
    limit: Annotated[int, Query(ge=0)] = 0,
) -> GetModelVersionsResponse:
    """A model's versions (by number unless ``sortBy``), paginated."""
    model = service.find_model(session, caller.user, model_name)
    versions = service.list_versions(session, model, sort_by=sort_by, order_by=order_by)
    start, end, page = paginate(len(versions), offset, limit)
    return GetModelVersionsResponse(
        model=models_to_wire(session, [model])[0],
        model_versions=versions_to_wire(session, model, versions[start:end]),
        pagination=page,
    )


@router.post("/models/{model_name}/versions", response_model=GetModelVersionResponse)
def post_model_version(
    model_name: str, body: PostModelVersionRequest, caller: CallerDep, session: SessionDep
) -> GetModelVersionResponse:
    """Register a COMPLETED checkpoint as the model's next version."""
    model = service.find_model(session, caller.user, model_name)
    fields = _version_fields(body)
    version = service.register_version(session, caller.user, model, body.checkpoint_uuid, fields)
    session.commit()
    return _version_answer(session, model, version)


@router.get(
    "/models/{model_name}/versions/{version_num}/metrics", response_model=MetricsReportsResponse
)
def get_model_version_metrics(
    model_name: str,
    version_num: int,
    caller: CallerDep,
    session: SessionDep,
    metric_group: Annotated[str | None, Query(alias="metricGroup")] = None,
    source_type: Annotated[str | None, Query(alias="trialSourceInfoType")] = None,
) -> MetricsReportsResponse:
    """``GetTrialMetricsByModelVersion`` (the SDK's ``ModelVersion.get_metrics``): the reports
    of the trials that said they used this model version
    (``report_task_using_model_version``), of one ``metricGroup`` or all."""
    model, version = _find_version(session, caller, model_name, version_num)
    reports = trial_svc.trial_source_metrics(
        session,
        caller.user,
        model_version=(model.id, version.version),
        source_type=source_type,
        group=metric_group,
    )
    return MetricsReportsResponse(metrics=[metrics_report_to_wire(r) for r in reports])


@router.get("/models/{model_name}/versions/{version_num}", response_model=GetModelVersionResponse)
def get_model_version(
    model_name: str, version_num: int, caller: CallerDep, session: SessionDep
) -> GetModelVersionResponse:
    """One version of a model."""
    model, version = _find_version(session, caller, model_name, version_num)
    return _version_answer(session, model, version)


@router.patch("/models/{model_name}/versions/{version_num}", response_model=GetModelVersionResponse)
def patch_model_version(
    model_name: str,
    version_num: int,
    body: PatchModelVersionRequest,
    caller: CallerDep,
    session: SessionDep,
) -> GetModelVersionResponse:
    """Change a version's name, comment, notes, metadata or labels."""
    model, version = _find_version(session, caller, model_name, version_num)
    fields = _version_fields(body)
    service.patch_version(session, caller.user, model, version, fields)
    session.commit()
    return _version_answer(session, model, version)


@router.delete("/models/{model_name}/versions/{version_num}", response_model=Empty)
def delete_model_version(
    model_name: str, version_num: int, caller: CallerDep, session: SessionDep
) -> Empty:
    """Delete a version (its checkpoint is no longer kept for it)."""
    model, version = _find_version(session, caller, model_name, version_num)
    service.delete_version(session, caller.user, model, version)
    session.commit()
    return Empty()
