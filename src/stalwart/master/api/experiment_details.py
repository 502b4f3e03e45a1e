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
import datetime as dt
import io
import tarfile
from collections import Counter
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import Field
from sqlalchemy import select

from stalwart.errors import NotFoundError
from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import WireModel, WireRequest, wire_time
from stalwart.master.db.tables import Experiment, MetricReport, Trial
from stalwart.master.redact import collect_secrets, redact_archive
from stalwart.master.services import experiments as svc
from stalwart.master.services import projects as project_svc
from stalwart.master.services.metrics import VALIDATION, parse_metric_value, searcher_settings

__all__ = ["router"]

router = APIRouter(tags=["experiments"])


class GetExperimentLabelsResponse(WireModel):
    """``v1GetExperimentLabelsResponse``."""

    labels: list[str] = Field(default_factory=list)


class ValidationHistoryEntry(WireModel):
    """``v1ValidationHistoryEntry``."""

    trial_id: int
    end_time: str
    searcher_metric: float


class GetExperimentValidationHistoryResponse(WireModel):
    """``v1GetExperimentValidationHistoryResponse``."""

    validation_history: list[ValidationHistoryEntry] = Field(default_factory=list)


class FileNode(WireModel):
    """``v1FileNode``."""

    path: str
    name: str
    is_dir: bool
    content_type: str = ""
    content_length: int = 0
    modified_time: str | None = None
    files: list[FileNode] = Field(default_factory=list)


class GetModelDefTreeResponse(WireModel):
    """``v1GetModelDefTreeResponse``."""

    files: list[FileNode] = Field(default_factory=list)


class GetModelDefFileRequest(WireRequest):
    """``v1GetModelDefFileRequest``."""

    experiment_id: int | None = None
    path: str = ""


class GetModelDefFileResponse(WireModel):
    """``v1GetModelDefFileResponse``: the file's bytes, base64."""

    file: str = ""


@router.get("/experiment/labels", response_model=GetExperimentLabelsResponse)
def experiment_labels(
    caller: CallerDep,
    session: SessionDep,
    project_id: Annotated[int, Query(alias="projectId")] = 0,
) -> GetExperimentLabelsResponse:
    """Labels by how many experiments carry them (then by name); 404 for a project the
    caller cannot see."""
    query = select(Experiment.labels)
    if project_id:
        project_svc.get_project(session, caller.user, project_id)
        query = query.where(Experiment.project_id == project_id)
    hidden = policy.hidden_project_ids(session, caller.user)
    if hidden:
        query = query.where(Experiment.project_id.not_in(hidden))
    usage: Counter[str] = Counter()
    for labels in session.scalars(query):
        usage.update(str(label) for label in dict.fromkeys(labels or ()))
    ordered = sorted(usage, key=lambda label: (-usage[label], label))
    return GetExperimentLabelsResponse(labels=ordered)


@router.get(
    "/experiments/{experiment_id}/validation-history",
    response_model=GetExperimentValidationHistoryResponse,
)
def validation_history(
    experiment_id: int, _caller: CallerDep, session: SessionDep
) -> GetExperimentValidationHistoryResponse:
    """The validations that set a new best searcher metric, oldest first."""
    experiment = svc.get_experiment(session, experiment_id)
    metric, smaller = searcher_settings(experiment.config)
    history: list[ValidationHistoryEntry] = []
    if metric is None:
        return GetExperimentValidationHistoryResponse()
    sign = 1.0 if smaller else -1.0
    query = (
        select(MetricReport.trial_id, MetricReport.report_time, MetricReport.metrics)
        .join(Trial, Trial.id == MetricReport.trial_id)
        .where(
            Trial.experiment_id == experiment_id,
            MetricReport.group == VALIDATION,
            MetricReport.archived.is_(False),
        )
        .order_by(MetricReport.report_time, MetricReport.id)
    )
    best: float | None = None
    for trial_id, when, metrics in session.execute(query):
        value = parse_metric_value((metrics or {}).get(metric))
        if value is None:
            continue
        if best is None or sign * value < best:
            best = sign * value
            history.append(
                ValidationHistoryEntry(
                    trial_id=trial_id, end_time=wire_time(when) or "", searcher_metric=value
                )
            )
    return GetExperimentValidationHistoryResponse(validation_history=history)


def _archive(session: SessionDep, experiment_id: int) -> tarfile.TarFile:
    """The experiment's model definition (secrets masked), opened."""
    blob = base64.b64decode(svc.model_definition_b64(session, experiment_id))
    experiment = svc.get_experiment(session, experiment_id)
    secrets = collect_secrets(experiment.config)
    if blob and secrets:
        blob = redact_archive(blob, secrets)
    if not blob:
        return tarfile.open(fileobj=io.BytesIO(), mode="w")  # no files
    return tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz")


def _content_type(data: bytes) -> str:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain; charset=utf-8"


@router.get("/experiments/{experiment_id}/file_tree", response_model=GetModelDefTreeResponse)
def file_tree(
    experiment_id: int, _caller: CallerDep, session: SessionDep
) -> GetModelDefTreeResponse:
    """The model definition's files and folders, nested, sorted by path."""
    nodes: dict[str, FileNode] = {}
    roots: list[FileNode] = []

    def node(path: str, is_dir: bool) -> FileNode:
        found = nodes.get(path)
        if found is not None:
            return found
        made = nodes[path] = FileNode(path=path, name=path.rsplit("/", 1)[-1], is_dir=is_dir)
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        (node(parent, True).files if parent else roots).append(made)
        return made

    with _archive(session, experiment_id) as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            path = member.name.removeprefix("./").strip("/")
            if not path or not (member.isdir() or member.isfile()):
                continue
            entry = node(path, member.isdir())
            entry.modified_time = wire_time(_mtime(member.mtime))
            if member.isfile():
                data = archive.extractfile(member)
                content = data.read() if data is not None else b""
                entry.content_length = len(content)
                entry.content_type = _content_type(content)
    return GetModelDefTreeResponse(files=roots)


def _mtime(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


@router.post("/experiments/{experiment_id}/file", response_model=GetModelDefFileResponse)
def model_def_file(
    experiment_id: int, body: GetModelDefFileRequest, _caller: CallerDep, session: SessionDep
) -> GetModelDefFileResponse:
    """One file of the model definition, base64; 404 for a path that is not a file of it."""
    wanted = body.path.removeprefix("./").strip("/")
    with _archive(session, experiment_id) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.removeprefix("./").strip("/") == wanted:
                data = archive.extractfile(member)
                content = data.read() if data is not None else b""
                return GetModelDefFileResponse(file=base64.b64encode(content).decode())
    raise NotFoundError(
        f"experiment {experiment_id}'s model definition has no file {body.path!r} "
        "(list them with GET /api/v1/experiments/{id}/file_tree)"
    )
