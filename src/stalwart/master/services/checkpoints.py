"""Checkpoints: reports from tasks, the training facts shown with them, listing and deletion.

Contracts:

- :func:`report_checkpoint` is idempotent on the UUID (a retried report of the same task is a
  no-op; the same UUID from another task is AlreadyExistsError). ``metadata.steps_completed``
  is required (InvalidArgumentError). The checkpoint is linked to its task's trial and
  experiment; a COMPLETED checkpoint becomes the trial's ``latest_checkpoint`` unless that one
  is further along. ``size`` is the sum of the resource sizes.
- A COMPLETED checkpoint of a trial reported by an allocation that has ended (an orphaned run
  whose agent was lost while the trial runs again elsewhere) is refused
  (FailedPreconditionError): it would move the trial's latest checkpoint past metrics the
  master refused from that run, and the next run would resume after them.
- A task (allocation token) may only report, patch or delete checkpoints of its own task
  (ForbiddenError); a user's rights on the task are checked by the route
  (``policy.require_change_tasks`` / ``policy.require_change_checkpoints``).
- The training facts of a checkpoint (:class:`CheckpointView`) are the metrics its trial
  reported at exactly the checkpoint's ``steps_completed`` (the newest non-archived report of
  each group); ``searcher_metric`` is the experiment's ``searcher.metric`` among the
  validation metrics. ``MetricReport.metrics`` holds the averaged metrics of a report.
- Deleting marks checkpoints DELETED through :mod:`~stalwart.master.transitions`; removing
  their files from checkpoint storage is the checkpoint-GC task's job (not done here).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
)
from stalwart.master.db.tables import (
    Allocation,
    Checkpoint,
    Experiment,
    MetricReport,
    StorageBackend,
    Task,
    Trial,
    utcnow,
)
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.transitions import check_edge, set_checkpoint_state

__all__ = [
    "SORT_ATTRIBUTES",
    "CheckpointReport",
    "CheckpointView",
    "MetricsAt",
    "build_views",
    "delete_checkpoints",
    "get_checkpoint",
    "parse_state",
    "patch_checkpoint_resources",
    "report_checkpoint",
    "set_checkpoint_metadata",
    "sorted_checkpoints",
]

_REPORTABLE = ("ACTIVE", "COMPLETED", "ERROR")
_STATE_ORDER = {"ACTIVE": 1, "COMPLETED": 2, "ERROR": 3, "DELETED": 4, "PARTIALLY_DELETED": 5}
SORT_ATTRIBUTES = (
    "SORT_BY_UNSPECIFIED",
    "SORT_BY_UUID",
    "SORT_BY_TRIAL_ID",
    "SORT_BY_BATCH_NUMBER",
    "SORT_BY_END_TIME",
    "SORT_BY_STATE",
    "SORT_BY_SEARCHER_METRIC",
)
_CHUNK = 500


@dataclass(frozen=True)
class CheckpointReport:
    """A checkpoint as a task reports it (``POST /api/v1/checkpoints``)."""

    uuid: str
    metadata: Mapping[str, Any]
    resources: Mapping[str, int | str]
    state: str | None = None
    task_id: str | None = None
    allocation_id: str | None = None
    report_time: str | None = None
    storage_id: int | None = None


@dataclass(frozen=True)
class MetricsAt:
    """One metrics report: averaged metrics and, when reported, per-batch metrics."""

    avg: dict[str, Any]
    batch: list[Any] | None = None


@dataclass
class CheckpointView:
    """A checkpoint with its trial's facts (``training`` on the wire)."""

    checkpoint: Checkpoint
    trial_id: int | None = None
    experiment_id: int | None = None
    experiment_config: dict[str, Any] | None = None
    hparams: dict[str, Any] | None = None
    training: MetricsAt | None = None
    validation: MetricsAt | None = None
    searcher_metric: float | None = None


def parse_state(value: str | None, *, allowed: Sequence[str] | None = None) -> str:
    """A checkpoint state without ``STATE_`` (unset or UNSPECIFIED means COMPLETED)."""
    name = (value or "").strip().upper().removeprefix("STATE_")
    if name in ("", "UNSPECIFIED"):
        name = "COMPLETED"
    if name not in (allowed or _STATE_ORDER):
        raise InvalidArgumentError(f"invalid checkpoint state {value!r}")
    return name


def _parse_time(value: str | None) -> dt.datetime:
    if not value:
        return utcnow()
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidArgumentError(f"invalid reportTime {value!r}: {exc}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _sizes(resources: Mapping[str, int | str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for path, size in resources.items():
        try:
            out[str(path)] = int(size)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"resources[{path!r}]: size {size!r} is not an integer"
            ) from exc
    return out


def _caller_task(session: Session, caller_allocation_id: str | None) -> str | None:
    if caller_allocation_id is None:
        return None
    allocation = session.get(Allocation, caller_allocation_id)
    if allocation is None:
        raise ForbiddenError(f"allocation {caller_allocation_id} not found")
    return allocation.task_id


def _steps(metadata: Mapping[str, Any]) -> int:
    if "steps_completed" not in metadata:
        raise InvalidArgumentError(
            "checkpoint metadata must have 'steps_completed' (the number of batches trained)"
        )
    value = metadata["steps_completed"]
    if isinstance(value, bool):
        raise InvalidArgumentError("metadata.steps_completed must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError("metadata.steps_completed must be an integer") from exc


def _check_allocation_live(session: Session, allocation_id: str | None, task: Task) -> None:
    allocation = session.get(Allocation, allocation_id) if allocation_id else None
    if allocation is None or allocation.end_time is None:
        return
    raise FailedPreconditionError(
        f"allocation {allocation.id} of trial {task.trial_id} has ended "
        f"({allocation.exit_reason or allocation.state}); a checkpoint it reports now is not "
        "recorded: the trial resumes from the checkpoints its current run reports"
    )


def report_checkpoint(
    session: Session, report: CheckpointReport, *, caller_allocation_id: str | None
) -> tuple[Checkpoint, bool]:
    """Record a reported checkpoint; returns ``(checkpoint, created)`` (see the contract).

    Flushes; the caller commits.
    """
    steps = _steps(report.metadata)
    state = parse_state(report.state, allowed=_REPORTABLE)
    sizes = _sizes(report.resources)
    own_task = _caller_task(session, caller_allocation_id)
    task_id = report.task_id or own_task
    if not task_id:
        raise InvalidArgumentError("a checkpoint report needs taskId")
    if own_task is not None and task_id != own_task:
        raise ForbiddenError(f"task {own_task} cannot report checkpoints of task {task_id}")
    if (
        caller_allocation_id is not None
        and report.allocation_id
        and report.allocation_id != caller_allocation_id
    ):
        raise ForbiddenError(
            f"allocation {caller_allocation_id} cannot report for {report.allocation_id}"
        )
    existing = session.get(Checkpoint, report.uuid)
    if existing is not None:
        if existing.task_id != task_id:
            raise AlreadyExistsError(f"checkpoint {report.uuid} was reported by another task")
        return existing, False
    task = session.get(Task, task_id)
    if task is None:
        raise NotFoundError(f"task {task_id} not found")
    if task.trial_id is not None and state == "COMPLETED":
        _check_allocation_live(session, report.allocation_id or caller_allocation_id, task)
    if report.storage_id is not None and session.get(StorageBackend, report.storage_id) is None:
        raise InvalidArgumentError(f"unknown storageId {report.storage_id}")
    ckpt = Checkpoint(
        uuid=report.uuid,
        task_id=task_id,
        allocation_id=report.allocation_id or caller_allocation_id,
        trial_id=task.trial_id,
        experiment_id=task.experiment_id,
        state=state,
        report_time=_parse_time(report.report_time),
        resources=sizes,
        metadata_=dict(report.metadata),
        storage_id=report.storage_id,
        steps_completed=steps,
        size=sum(sizes.values()),
    )
    session.add(ckpt)
    if task.trial_id is not None and state == "COMPLETED":
        trial = session.get(Trial, task.trial_id)
        if trial is not None:
            latest = session.get(Checkpoint, trial.latest_checkpoint or "")
            if latest is None or (latest.steps_completed or 0) <= steps:
                trial.latest_checkpoint = ckpt.uuid
    session.flush()
    return ckpt, True


def get_checkpoint(session: Session, uuid: str) -> Checkpoint:
    """The checkpoint, or NotFoundError (404)."""
    ckpt = session.get(Checkpoint, uuid)
    if ckpt is None:
        raise NotFoundError(f"checkpoint {uuid} not found")
    return ckpt


def _chunks(values: Sequence[Any]) -> list[Sequence[Any]]:
    return [values[i : i + _CHUNK] for i in range(0, len(values), _CHUNK)]


def _metric_reports(
    session: Session, pairs: set[tuple[int, int]]
) -> dict[tuple[int, str, int], MetricsAt]:
    found: dict[tuple[int, str, int], MetricsAt] = {}
    trial_ids = sorted({t for t, _ in pairs})
    steps = sorted({s for _, s in pairs})
    for trials in _chunks(trial_ids):
        for step_chunk in _chunks(steps):
            rows = session.scalars(
                select(MetricReport)
                .where(
                    MetricReport.trial_id.in_(trials),
                    MetricReport.steps_completed.in_(step_chunk),
                    MetricReport.group.in_(("training", "validation")),
                    MetricReport.archived.is_(False),
                )
                .order_by(MetricReport.id)
            )
            for row in rows:
                if (row.trial_id, row.steps_completed) in pairs:
                    key = (row.trial_id, row.group, row.steps_completed)
                    found[key] = MetricsAt(avg=dict(row.metrics or {}), batch=row.batch_metrics)
    return found


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number


def build_views(session: Session, ckpts: Sequence[Checkpoint]) -> list[CheckpointView]:
    """Checkpoints with their training facts, in the given order (see the contract)."""
    trial_ids = sorted({c.trial_id for c in ckpts if c.trial_id is not None})
    trials: dict[int, Trial] = {}
    for chunk in _chunks(trial_ids):
        trials.update({t.id: t for t in session.scalars(select(Trial).where(Trial.id.in_(chunk)))})
    exp_ids = sorted(
        {c.experiment_id for c in ckpts if c.experiment_id is not None}
        | {t.experiment_id for t in trials.values()}
    )
    experiments: dict[int, Experiment] = {}
    for chunk in _chunks(exp_ids):
        rows = session.scalars(select(Experiment).where(Experiment.id.in_(chunk)))
        experiments.update({e.id: e for e in rows})
    pairs = {
        (c.trial_id, c.steps_completed)
        for c in ckpts
        if c.trial_id is not None and c.steps_completed is not None
    }
    metrics = _metric_reports(session, pairs) if pairs else {}
    views: list[CheckpointView] = []
    for ckpt in ckpts:
        trial = trials.get(ckpt.trial_id) if ckpt.trial_id is not None else None
        exp_id = ckpt.experiment_id or (trial.experiment_id if trial else None)
        exp = experiments.get(exp_id) if exp_id is not None else None
        view = CheckpointView(checkpoint=ckpt)
        if trial is not None and exp is not None:
            steps = ckpt.steps_completed
            view.trial_id = trial.id
            view.experiment_id = exp.id
            view.experiment_config = exp.config
            view.hparams = trial.hparams
            if steps is not None:
                view.training = metrics.get((trial.id, "training", steps))
                view.validation = metrics.get((trial.id, "validation", steps))
            if view.validation is not None:
                name = typed_config(exp).searcher.metric
                view.searcher_metric = _as_float(view.validation.avg.get(name))
        views.append(view)
    return views


def _smaller_is_better(session: Session, *, experiment_id: int | None) -> bool:
    exp = session.get(Experiment, experiment_id) if experiment_id is not None else None
    return typed_config(exp).searcher.smaller_is_better if exp is not None else True


def _sort_value(view: CheckpointView, sort_by: str, metric: str | None) -> Any:
    ckpt = view.checkpoint
    if metric is not None:
        return _as_float(view.validation.avg.get(metric)) if view.validation else None
    if sort_by == "SORT_BY_UUID":
        return ckpt.uuid
    if sort_by == "SORT_BY_BATCH_NUMBER":
        return ckpt.steps_completed
    if sort_by == "SORT_BY_END_TIME":
        return ckpt.report_time
    if sort_by == "SORT_BY_STATE":
        return _STATE_ORDER.get(ckpt.state, 0)
    if sort_by == "SORT_BY_SEARCHER_METRIC":
        return view.searcher_metric
    return view.trial_id


def sorted_checkpoints(
    session: Session,
    *,
    experiment_id: int | None = None,
    trial_id: int | None = None,
    states: Sequence[str] = (),
    sort_by: str | None = None,
    sort_metric: str | None = None,
    order_by: str | None = None,
) -> list[CheckpointView]:
    """The checkpoints of an experiment or a trial, filtered by state and sorted.

    ``sort_by`` is a ``checkpointv1SortBy`` name, ``sort_metric`` a validation metric name (not
    both). Unset values sort last in either direction. Without ``order_by``, searcher-metric
    sorts (and ``sort_metric`` = the searcher metric) put the best first (``smaller_is_better``);
    everything else is ascending. Ties are broken by report time, then UUID.
    """
    if sort_by not in (None, "", *SORT_ATTRIBUTES):
        raise InvalidArgumentError(f"unsupported sortByAttr {sort_by}")
    if sort_metric and sort_by not in (None, "", "SORT_BY_UNSPECIFIED"):
        raise InvalidArgumentError("give sortByAttr or sortByMetric, not both")
    if order_by not in (None, "", "ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise InvalidArgumentError(f"unsupported orderBy {order_by}")
    wanted = {parse_state(s) for s in states if s and s != "STATE_UNSPECIFIED"}
    query = select(Checkpoint)
    exp_for_order: int | None
    if experiment_id is not None:
        query = query.where(Checkpoint.experiment_id == experiment_id)
        exp_for_order = experiment_id
    else:
        query = query.where(Checkpoint.trial_id == trial_id)
        trial = session.get(Trial, trial_id) if trial_id is not None else None
        exp_for_order = trial.experiment_id if trial is not None else None
    if wanted:
        query = query.where(Checkpoint.state.in_(sorted(wanted)))
    views = build_views(session, list(session.scalars(query)))

    sort_key = sort_by or "SORT_BY_UNSPECIFIED"
    metric = sort_metric or None
    if order_by in ("ORDER_BY_ASC", "ORDER_BY_DESC"):
        descending = order_by == "ORDER_BY_DESC"
    else:
        exp = session.get(Experiment, exp_for_order) if exp_for_order is not None else None
        searcher_metric = typed_config(exp).searcher.metric if exp is not None else None
        best_first = sort_key == "SORT_BY_SEARCHER_METRIC" or (
            metric is not None and metric == searcher_metric
        )
        descending = best_first and not _smaller_is_better(session, experiment_id=exp_for_order)

    def tiebreak(view: CheckpointView) -> tuple[dt.datetime, str]:
        return (view.checkpoint.report_time, view.checkpoint.uuid)

    present: list[tuple[Any, CheckpointView]] = []
    missing: list[CheckpointView] = []
    for view in views:
        value = _sort_value(view, sort_key, metric)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            missing.append(view)
        else:
            present.append((value, view))
    present.sort(key=lambda pair: (pair[0], *tiebreak(pair[1])), reverse=descending)
    missing.sort(key=tiebreak, reverse=descending)
    return [view for _, view in present] + missing


def _check_scope(ckpt: Checkpoint, own_task: str | None) -> None:
    if own_task is not None and ckpt.task_id != own_task:
        raise ForbiddenError(f"task {own_task} cannot change checkpoint {ckpt.uuid}")


def _get_many(session: Session, uuids: Sequence[str]) -> list[Checkpoint]:
    found = {
        c.uuid: c for c in session.scalars(select(Checkpoint).where(Checkpoint.uuid.in_(uuids)))
    }
    missing = [u for u in uuids if u not in found]
    if missing:
        raise NotFoundError(f"checkpoints not found: {', '.join(missing)}")
    return [found[u] for u in dict.fromkeys(uuids)]


def delete_checkpoints(
    session: Session, uuids: Sequence[str], *, caller_allocation_id: str | None
) -> list[Checkpoint]:
    """Mark checkpoints DELETED (all or nothing; already deleted ones are left alone).

    Only the records change: deleting the files in checkpoint storage is checkpoint GC's job
    (:mod:`stalwart.master.cluster.checkpoint_gc`), which runs once an experiment has ended.
    An ended experiment that GC already went through is marked for another pass here, so the
    files of a checkpoint deleted afterwards go too (never for unmanaged experiments: their
    storage is their script's). Flushes; the caller commits.
    """
    if not uuids:
        raise InvalidArgumentError("checkpointUuids is empty")
    own_task = _caller_task(session, caller_allocation_id)
    ckpts = _get_many(session, uuids)
    for ckpt in ckpts:
        _check_scope(ckpt, own_task)
        check_edge("checkpoint", ckpt.state, "DELETED")
    for ckpt in ckpts:
        set_checkpoint_state(session, ckpt, "DELETED")
    for experiment_id in sorted({c.experiment_id for c in ckpts if c.experiment_id is not None}):
        experiment = session.get(Experiment, experiment_id)
        if experiment is not None and experiment.checkpoints_collected and not experiment.unmanaged:
            experiment.checkpoints_collected = False  # the loop collects ended ones again
    session.flush()
    return ckpts


def patch_checkpoint_resources(
    session: Session,
    uuid: str,
    resources: Mapping[str, int | str] | None,
    *,
    caller_allocation_id: str | None,
) -> Checkpoint:
    """Record what is left of a checkpoint after files were deleted from storage.

    ``None`` changes nothing; an empty map means every file is gone (DELETED); otherwise the
    resources and size are replaced, and the checkpoint becomes PARTIALLY_DELETED when the
    files changed (a ``metadata.json`` the old record lacked does not count as a change).
    """
    ckpt = get_checkpoint(session, uuid)
    _check_scope(ckpt, _caller_task(session, caller_allocation_id))
    if resources is None:
        return ckpt
    if not resources:
        set_checkpoint_state(session, ckpt, "DELETED")
        session.flush()
        return ckpt
    new = _sizes(resources)
    old = {str(k): int(v) for k, v in (ckpt.resources or {}).items()}
    if "metadata.json" not in old and "metadata.json" in new:
        old["metadata.json"] = new["metadata.json"]
    if new != old:
        set_checkpoint_state(session, ckpt, "PARTIALLY_DELETED")
    ckpt.resources = new
    ckpt.size = sum(new.values())
    session.flush()
    return ckpt


def set_checkpoint_metadata(
    session: Session, uuid: str, metadata: Mapping[str, Any], *, caller_allocation_id: str | None
) -> Checkpoint:
    """Replace a checkpoint's user metadata (the SDK's add/remove_metadata send it whole)."""
    ckpt = get_checkpoint(session, uuid)
    _check_scope(ckpt, _caller_task(session, caller_allocation_id))
    ckpt.metadata_ = dict(metadata)
    session.flush()
    return ckpt
