"""What Determined's web UI reads about experiments besides the experiment itself: the labels
in use, the validation history, the model definition's files, and best trials for the
experiment search."""

from __future__ import annotations

import base64
import datetime as dt
import io
import tarfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import NotFoundError
from stalwart.master import policy
from stalwart.master.db.tables import Experiment, MetricReport, Trial, User
from stalwart.master.redact import collect_secrets, redact_archive
from stalwart.master.services.experiments import get_experiment, model_definition_b64
from stalwart.master.services.metrics import VALIDATION, parse_metric_value, searcher_settings
from stalwart.master.services.trials import TrialView, trial_views

__all__ = [
    "ModelFile",
    "labels_by_use",
    "model_def_file",
    "model_def_tree",
    "trial_views_by_id",
    "validation_history",
]


def labels_by_use(session: Session, user: User, project_id: int | None) -> list[str]:
    """The labels of the experiments ``user`` sees (of ``project_id`` when given), by how many
    experiments carry them, then by name (Determined: most used first)."""
    query = select(Experiment.labels)
    if project_id:
        query = query.where(Experiment.project_id == project_id)
    hidden = policy.hidden_project_ids(session, user)
    if hidden:
        query = query.where(Experiment.project_id.not_in(hidden))
    usage: Counter[str] = Counter()
    for labels in session.scalars(query):
        usage.update(str(label) for label in dict.fromkeys(labels or ()))
    return sorted(usage, key=lambda label: (-usage[label], label))


def validation_history(
    session: Session, experiment_id: int
) -> list[tuple[int, dt.datetime, float]]:
    """``(trial id, report time, searcher metric)`` of each validation that improved on the
    experiment's best searcher metric so far, oldest first (404 for an unknown experiment;
    none without a searcher metric)."""
    metric, smaller = searcher_settings(get_experiment(session, experiment_id).config)
    if metric is None:
        return []
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
    out: list[tuple[int, dt.datetime, float]] = []
    best: float | None = None
    for trial_id, when, metrics in session.execute(query):
        value = parse_metric_value((metrics or {}).get(metric))
        if value is not None and (best is None or sign * value < best):
            best = sign * value
            out.append((int(trial_id), when, value))
    return out


@dataclass
class ModelFile:
    """A file or folder of a model definition, with what a folder holds."""

    path: str
    is_dir: bool
    modified: dt.datetime | None = None
    content_length: int = 0
    content_type: str = ""
    files: list[ModelFile] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The last part of the path."""
        return self.path.rsplit("/", 1)[-1]


def _archive(session: Session, experiment_id: int) -> tarfile.TarFile:
    """The experiment's model definition with its secrets masked, opened (404 if unknown)."""
    blob = base64.b64decode(model_definition_b64(session, experiment_id))
    secrets = collect_secrets(get_experiment(session, experiment_id).config)
    if blob and secrets:
        blob = redact_archive(blob, secrets)
    if not blob:
        return tarfile.open(fileobj=io.BytesIO(), mode="w")  # no files
    return tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz")


def _clean(name: str) -> str:
    return name.removeprefix("./").strip("/")


def _content_type(data: bytes) -> str:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain; charset=utf-8"


def model_def_tree(session: Session, experiment_id: int) -> list[ModelFile]:
    """The model definition's files and folders, nested, sorted by path (secrets masked)."""
    nodes: dict[str, ModelFile] = {}
    roots: list[ModelFile] = []

    def node(path: str, is_dir: bool) -> ModelFile:
        found = nodes.get(path)
        if found is None:
            found = nodes[path] = ModelFile(path=path, is_dir=is_dir)
            parent = path.rsplit("/", 1)[0] if "/" in path else ""
            (node(parent, True).files if parent else roots).append(found)
        return found

    with _archive(session, experiment_id) as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            path = _clean(member.name)
            if not path or not (member.isdir() or member.isfile()):
                continue
            entry = node(path, member.isdir())
            entry.modified = dt.datetime.fromtimestamp(member.mtime, dt.UTC)
            if member.isfile():
                data = archive.extractfile(member)
                content = data.read() if data is not None else b""
                entry.content_length = len(content)
                entry.content_type = _content_type(content)
    return roots


def model_def_file(session: Session, experiment_id: int, path: str) -> bytes:
    """One file of the model definition (secrets masked); 404 for a path that is not one."""
    wanted = _clean(path)
    with _archive(session, experiment_id) as archive:
        for member in archive.getmembers():
            if member.isfile() and _clean(member.name) == wanted:
                data = archive.extractfile(member)
                return data.read() if data is not None else b""
    raise NotFoundError(
        f"experiment {experiment_id}'s model definition has no file {path!r} "
        f"(list them with GET /api/v1/experiments/{experiment_id}/file_tree)"
    )


def trial_views_by_id(session: Session, trial_ids: Iterable[int]) -> dict[int, TrialView]:
    """``{id: view}`` of the trials of ``trial_ids`` that exist."""
    ids = sorted(set(trial_ids))
    rows = list(session.scalars(select(Trial).where(Trial.id.in_(ids))))
    return {view.trial.id: view for view in trial_views(session, rows)}
