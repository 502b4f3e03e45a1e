"""Routes: what Determined's web UI reads about experiments besides the experiment itself.

- ``GET /experiment/labels?projectId=``: the labels of the experiments the caller sees (of
  one project when given), most used first.
- ``GET /experiments/{id}/validation-history``: each validation that improved on the
  experiment's best searcher metric so far, in time order.
- ``GET /experiments/{id}/file_tree`` and ``POST /experiments/{id}/file`` (``{path}``): the
  model definition's files as a nested tree, and one file's content (base64), with the
  experiment's secrets masked as ``/model_def`` masks them.
"""

from __future__ import annotations

import base64
from typing import Annotated

from fastapi import APIRouter, Query

from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.experiment_details import (
    FileNode,
    GetExperimentLabelsResponse,
    GetExperimentValidationHistoryResponse,
    GetModelDefFileRequest,
    GetModelDefFileResponse,
    GetModelDefTreeResponse,
    ValidationHistoryEntry,
)
from stalwart.master.services import experiment_details as svc
from stalwart.master.services import projects as project_svc

__all__ = ["router"]

router = APIRouter(tags=["experiments"])


@router.get("/experiment/labels", response_model=GetExperimentLabelsResponse)
def experiment_labels(
    caller: CallerDep,
    session: SessionDep,
    project_id: Annotated[int, Query(alias="projectId")] = 0,
) -> GetExperimentLabelsResponse:
    """Labels by how many experiments carry them (then by name); 404 for a project the
    caller cannot see."""
    if project_id:
        project_svc.get_project(session, caller.user, project_id)
    return GetExperimentLabelsResponse(labels=svc.labels_by_use(session, caller.user, project_id))


@router.get(
    "/experiments/{experiment_id}/validation-history",
    response_model=GetExperimentValidationHistoryResponse,
)
def validation_history(
    experiment_id: int, _caller: CallerDep, session: SessionDep
) -> GetExperimentValidationHistoryResponse:
    """The validations that set a new best searcher metric, oldest first."""
    return GetExperimentValidationHistoryResponse(
        validation_history=[
            ValidationHistoryEntry(trial_id=t, end_time=wire_time(when) or "", searcher_metric=v)
            for t, when, v in svc.validation_history(session, experiment_id)
        ]
    )


def _node(entry: svc.ModelFile) -> FileNode:
    return FileNode(
        path=entry.path,
        name=entry.name,
        is_dir=entry.is_dir,
        content_type=entry.content_type,
        content_length=entry.content_length,
        modified_time=wire_time(entry.modified),
        files=[_node(child) for child in entry.files],
    )


@router.get("/experiments/{experiment_id}/file_tree", response_model=GetModelDefTreeResponse)
def file_tree(
    experiment_id: int, _caller: CallerDep, session: SessionDep
) -> GetModelDefTreeResponse:
    """The model definition's files and folders, nested, sorted by path."""
    return GetModelDefTreeResponse(
        files=[_node(e) for e in svc.model_def_tree(session, experiment_id)]
    )


@router.post("/experiments/{experiment_id}/file", response_model=GetModelDefFileResponse)
def model_def_file(
    experiment_id: int, body: GetModelDefFileRequest, _caller: CallerDep, session: SessionDep
) -> GetModelDefFileResponse:
    """One file of the model definition, base64; 404 for a path that is not a file of it."""
    content = svc.model_def_file(session, experiment_id, body.path)
    return GetModelDefFileResponse(file=base64.b64encode(content).decode())
