"""Trials as the API shows them, their workloads, and what a running trial reports besides metrics.

- :func:`trial_views` assembles whole pages of trials with a fixed number of queries (validation
  summaries, checkpoint totals, run durations and the live allocation states are each one
  batched query), never one query per trial.
- Active trials are shown as QUEUED, PULLING, STARTING or RUNNING from their live allocations
  (:func:`active_substates`), as Determined does; filters on those names mean ACTIVE.
- :func:`trial_workloads` merges training reports, validation reports and checkpoints by
  ``totalBatches`` (non-decreasing, training before validation before checkpoint on a tie) and
  pages them in the database.
- Progress, runner state, early exit, run metadata and ``runs/start`` each commit one short
  transaction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import (
    ColumnElement,
    Integer,
    case,
    cast,
    extract,
    func,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import UnaryExpression

from stalwart.errors import ForbiddenError, InvalidArgumentError, NotFoundError
from stalwart.master import policy
from stalwart.master.api.models.common import Pagination, paginate
from stalwart.master.db.tables import (
    Allocation,
    Checkpoint,
    Experiment,
    MetricReport,
    StorageBackend,
    Task,
    Trial,
    TrialSourceInfo,
    User,
    utcnow,
)
from stalwart.master.services.log_policies import label_of
from stalwart.master.services.metrics import (
    TRAINING,
    VALIDATION,
    ValidationSummary,
    searcher_settings,
    validation_summaries,
)
from stalwart.master.services.series_store import stored_summaries
from stalwart.master.transitions import EXPERIMENT_TRANSITIONS, TRIAL_TRANSITIONS

__all__ = [
    "ACTIVE_SUBSTATES",
    "COUNTED_CHECKPOINT_STATES",
    "TRIAL_SOURCE_TYPES",
    "Page",
    "TrialView",
    "Workload",
    "active_substates",
    "add_storage_backend",
    "get_run_metadata",
    "get_trial",
    "list_experiment_trials",
    "merge_run_metadata",
    "most_progressed",
    "post_run_metadata",
    "record_trial_source",
    "report_early_exit",
    "report_progress",
    "set_runner_state",
    "storage_config_sha256",
    "substate_of_allocation",
    "trial_source_metrics",
    "trial_views",
    "trial_workloads",
    "wire_states",
]

T = TypeVar("T")

ACTIVE_SUBSTATES = ("QUEUED", "PULLING", "STARTING", "RUNNING")
"""Names the API shows for an ACTIVE trial or experiment, least to most progressed."""

COUNTED_CHECKPOINT_STATES = ("COMPLETED", "PARTIALLY_DELETED")
"""Checkpoints counted in sizes and counts (as Determined: stored ones only)."""

_SUBSTATES = {
    "PENDING": "QUEUED",
    "WAITING": "QUEUED",
    "ASSIGNED": "QUEUED",
    "PULLING": "PULLING",
    "STARTING": "STARTING",
    "RUNNING": "RUNNING",
    "TERMINATING": "RUNNING",
}

_EXIT_REASONS = {
    "EXITED_REASON_INVALID_HP": "INVALID_HP",
    "EXITED_REASON_INIT_INVALID_HP": "INIT_INVALID_HP",
}


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list and where it is."""

    items: list[T]
    pagination: Pagination


@dataclass(frozen=True)
class TrialView:
    """A trial and everything the API shows about it."""

    trial: Trial
    state: str
    latest_validation: MetricReport | None
    best_validation: MetricReport | None
    wall_clock_time: float
    checkpoint_count: int
    checkpoint_size: int
    summary_metrics: dict[str, Any] | None = None
    """:mod:`stalwart.master.services.summary_metrics`, as stored (None: no reports yet)."""
    log_policy_matched: str | None = None


@dataclass(frozen=True)
class Workload:
    """One element of a trial's workloads: a metrics report or a checkpoint."""

    kind: str  # "training" | "validation" | "checkpoint"
    report: MetricReport | None = None
    checkpoint: Checkpoint | None = None


_KNOWN_STATES = frozenset(
    {*EXPERIMENT_TRANSITIONS, *TRIAL_TRANSITIONS, *ACTIVE_SUBSTATES, "UNSPECIFIED"}
)


def wire_states(states: Iterable[str]) -> list[str]:
    """Stored state names for API filter values (``STATE_`` dropped; substates mean ACTIVE).

    An unknown name is a 400, as an unknown enum value is for Determined.
    """
    out: set[str] = set()
    for state in states:
        name = state.removeprefix("STATE_")
        if name not in _KNOWN_STATES:
            raise InvalidArgumentError(f"unknown state {state!r}: use names like STATE_ACTIVE")
        if name == "UNSPECIFIED":
            continue
        out.add("ACTIVE" if name in ACTIVE_SUBSTATES else name)
    return sorted(out)


def substate_of_allocation(state: str) -> str:
    """The substate an ACTIVE trial shows while it has a live allocation in ``state``."""
    return _SUBSTATES.get(state, "QUEUED")


def most_progressed(substates: Iterable[str]) -> str:
    """The most progressed of ``substates`` (QUEUED when there are none)."""
    best = 0
    for name in substates:
        best = max(best, ACTIVE_SUBSTATES.index(name))
    return ACTIVE_SUBSTATES[best]


def active_substates(session: Session, task_ids: Iterable[str]) -> dict[str, str]:
    """For each task with a live allocation, the substate an ACTIVE trial shows."""
    ids = sorted(set(task_ids))
    if not ids:
        return {}
    found: dict[str, list[str]] = {}
    rows = session.execute(
        select(Allocation.task_id, Allocation.state).where(
            Allocation.task_id.in_(ids), Allocation.state != "TERMINATED"
        )
    )
    for task_id, state in rows:
        found.setdefault(task_id, []).append(substate_of_allocation(state))
    return {task_id: most_progressed(names) for task_id, names in found.items()}


def get_trial(session: Session, trial_id: int) -> Trial:
    """The trial, or NotFoundError."""
    trial = session.get(Trial, trial_id)
    if trial is None:
        raise NotFoundError(f"trial {trial_id} not found")
    return trial


def trial_views(session: Session, trials: Sequence[Trial]) -> list[TrialView]:
    """Views of ``trials`` (in the same order), in a fixed number of batched queries."""
    if not trials:
        return []
    ids = [t.id for t in trials]
    task_ids = [t.task_id for t in trials]
    settings: dict[int, tuple[str | None, bool]] = {}
    unmanaged: set[int] = set()  # their active trials run where their scripts run
    for exp_id, searcher, is_unmanaged in session.execute(
        select(Experiment.id, Experiment.config["searcher"], Experiment.unmanaged).where(
            Experiment.id.in_({t.experiment_id for t in trials})
        )
    ):
        settings[exp_id] = searcher_settings({"searcher": searcher})
        if is_unmanaged:
            unmanaged.add(exp_id)
    summaries: dict[int, ValidationSummary] = {}
    by_setting: dict[tuple[str | None, bool], list[int]] = {}
    for t in trials:
        by_setting.setdefault(settings.get(t.experiment_id, (None, True)), []).append(t.id)
    for (metric, smaller), trial_ids in by_setting.items():
        summaries.update(validation_summaries(session, trial_ids, metric, smaller))
    checkpoints = {
        trial_id: (int(count), int(size or 0))
        for trial_id, count, size in session.execute(
            select(Checkpoint.trial_id, func.count(), func.sum(Checkpoint.size))
            .where(Checkpoint.trial_id.in_(ids), Checkpoint.state.in_(COUNTED_CHECKPOINT_STATES))
            .group_by(Checkpoint.trial_id)
        )
    }
    now = utcnow()
    wall: dict[str, float] = {}
    for task_id, start, end in session.execute(
        select(Allocation.task_id, Allocation.start_time, Allocation.end_time).where(
            Allocation.task_id.in_(task_ids)
        )
    ):
        wall[task_id] = wall.get(task_id, 0.0) + max(0.0, ((end or now) - start).total_seconds())
    substates = active_substates(session, [t.task_id for t in trials if t.state == "ACTIVE"])
    summaries_by_trial = stored_summaries(session, ids)
    labels = {
        task_id: label_of(extra)
        for task_id, extra in session.execute(
            select(Task.task_id, Task.extra).where(Task.task_id.in_(task_ids))
        )
    }
    views = []
    for t in trials:
        summary = summaries.get(t.id, ValidationSummary(None, None))
        count, size = checkpoints.get(t.id, (0, 0))
        state = t.state
        if state == "ACTIVE":
            queued = "RUNNING" if t.experiment_id in unmanaged else "QUEUED"
            state = substates.get(t.task_id, queued)
        views.append(
            TrialView(
                trial=t,
                state=state,
                latest_validation=summary.latest,
                best_validation=summary.best,
                wall_clock_time=wall.get(t.task_id, 0.0),
                checkpoint_count=count,
                checkpoint_size=size,
                summary_metrics=summaries_by_trial.get(t.id),
                log_policy_matched=labels.get(t.task_id),
            )
        )
    return views


def _trial_order(session: Session, sort_by: str, smaller_is_better: bool) -> Any:
    columns: dict[str, Any] = {
        "SORT_BY_START_TIME": Trial.start_time,
        "SORT_BY_END_TIME": Trial.end_time,
        "SORT_BY_STATE": Trial.state,
        "SORT_BY_BATCHES_PROCESSED": Trial.total_batches,
        "SORT_BY_RESTARTS": Trial.restarts,
    }
    if sort_by in columns:
        return columns[sort_by]
    if sort_by in ("SORT_BY_BEST_VALIDATION_METRIC", "SORT_BY_LATEST_VALIDATION_METRIC"):
        # Signed so that ascending is best first (latest is approximated by best).
        return Trial.searcher_metric_value * (1.0 if smaller_is_better else -1.0)
    if sort_by == "SORT_BY_CHECKPOINT_SIZE":
        return (
            select(func.coalesce(func.sum(Checkpoint.size), 0))
            .where(
                Checkpoint.trial_id == Trial.id,
                Checkpoint.state.in_(COUNTED_CHECKPOINT_STATES),
            )
            .scalar_subquery()
        )
    if sort_by == "SORT_BY_DURATION":
        return _duration_seconds(session)
    return Trial.id


def _duration_seconds(session: Session) -> ColumnElement[Any]:
    """Seconds from a trial's start to its end (or now), in the session's SQL dialect."""
    end = func.coalesce(Trial.end_time, func.current_timestamp())
    if session.get_bind().dialect.name == "sqlite":
        days: ColumnElement[Any] = func.julianday(end) - func.julianday(Trial.start_time)
        return days * 86400.0
    seconds: ColumnElement[Any] = extract("epoch", end - Trial.start_time)
    return seconds


def _ordered(column: Any, desc: bool) -> UnaryExpression[Any]:
    ordered: UnaryExpression[Any] = column.desc() if desc else column.asc()
    return ordered.nulls_last()


def list_experiment_trials(
    session: Session,
    experiment_id: int,
    *,
    states: Sequence[str] = (),
    sort_by: str = "SORT_BY_ID",
    order_desc: bool = False,
    offset: int = 0,
    limit: int = 0,
) -> Page[TrialView]:
    """One page of an experiment's trials (404 for an unknown experiment)."""
    config_searcher = session.execute(
        select(Experiment.id, Experiment.config["searcher"]).where(Experiment.id == experiment_id)
    ).first()
    if config_searcher is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    _, smaller = searcher_settings({"searcher": config_searcher[1]})
    where = [Trial.experiment_id == experiment_id]
    stored = wire_states(states)
    if stored:
        where.append(Trial.state.in_(stored))
    total = session.scalar(select(func.count()).select_from(Trial).where(*where)) or 0
    start, end, pagination = paginate(total, offset, limit)
    if end <= start:
        return Page([], pagination)
    order = _trial_order(session, sort_by, smaller)
    query = select(Trial).where(*where).order_by(_ordered(order, order_desc))
    if sort_by not in ("SORT_BY_ID", "SORT_BY_UNSPECIFIED"):
        query = query.order_by(_ordered(Trial.id, order_desc))
    trials = list(session.scalars(query.offset(start).limit(end - start)))
    return Page(trial_views(session, trials), pagination)


_KIND_RANK = {TRAINING: 0, VALIDATION: 1, "checkpoint": 2}


def trial_workloads(
    session: Session,
    trial_id: int,
    *,
    offset: int = 0,
    limit: int = 0,
    order_desc: bool = False,
    filter_option: str = "FILTER_OPTION_UNSPECIFIED",
    group: str | None = None,
) -> Page[Workload]:
    """One page of a trial's workloads, merged by totalBatches (see the module docstring).

    ``filter_option`` keeps only checkpoints, validations, or both; ``group`` keeps only that
    metrics group's reports (a custom group's show as training workloads) and no checkpoints.
    """
    get_trial(session, trial_id)
    if filter_option == "FILTER_OPTION_CHECKPOINT":
        groups, want_checkpoints = [], True
    elif filter_option == "FILTER_OPTION_VALIDATION":
        groups, want_checkpoints = [VALIDATION], False
    elif filter_option == "FILTER_OPTION_CHECKPOINT_OR_VALIDATION":
        groups, want_checkpoints = [VALIDATION], True
    else:
        groups = [group] if group else [TRAINING, VALIDATION]
        want_checkpoints = not group
    parts = []
    if groups:
        rank = _rank(groups)
        parts.append(
            select(
                literal_column("'m'").label("src"),
                cast(MetricReport.id, Integer).label("num"),
                literal_column("''").label("uuid"),
                MetricReport.steps_completed.label("steps"),
                rank.label("rank"),
                MetricReport.report_time.label("t"),
            ).where(
                MetricReport.trial_id == trial_id,
                MetricReport.group.in_(groups),
                MetricReport.archived.is_(False),
            )
        )
    if want_checkpoints:
        parts.append(
            select(
                literal_column("'c'").label("src"),
                literal_column("0").label("num"),
                Checkpoint.uuid.label("uuid"),
                func.coalesce(Checkpoint.steps_completed, 0).label("steps"),
                literal_column(str(_KIND_RANK["checkpoint"])).label("rank"),
                Checkpoint.report_time.label("t"),
            ).where(Checkpoint.trial_id == trial_id)
        )
    if not parts:
        _, _, pagination = paginate(0, offset, limit)
        return Page([], pagination)
    merged = union_all(*parts).subquery() if len(parts) > 1 else parts[0].subquery()
    total = session.scalar(select(func.count()).select_from(merged)) or 0
    start, end, pagination = paginate(total, offset, limit)
    if end <= start:
        return Page([], pagination)
    columns = (merged.c.steps, merged.c.rank, merged.c.t, merged.c.num, merged.c.uuid)
    order = [c.desc() if order_desc else c.asc() for c in columns]
    keys = session.execute(
        select(merged.c.src, merged.c.num, merged.c.uuid)
        .order_by(*order)
        .offset(start)
        .limit(end - start)
    ).all()
    report_ids = [int(num) for src, num, _ in keys if src == "m"]
    uuids = [str(uuid) for src, _, uuid in keys if src == "c"]
    reports = {
        r.id: r
        for r in session.scalars(select(MetricReport).where(MetricReport.id.in_(report_ids)))
    }
    ckpts = {
        c.uuid: c for c in session.scalars(select(Checkpoint).where(Checkpoint.uuid.in_(uuids)))
    }
    items: list[Workload] = []
    for src, num, uuid in keys:
        if src == "m":
            report = reports[int(num)]
            kind = VALIDATION if report.group == VALIDATION else TRAINING
            items.append(Workload(kind, report=report))
        else:
            items.append(Workload("checkpoint", checkpoint=ckpts[str(uuid)]))
    return Page(items, pagination)


def _rank(groups: Sequence[str]) -> ColumnElement[Any]:
    """0 for training-like groups, 1 for validation (the tie order of merged workloads)."""
    if VALIDATION not in groups:
        return literal_column("0")
    return case((MetricReport.group == VALIDATION, 1), else_=0)


def report_progress(session: Session, trial_id: int, progress: float) -> float | None:
    """Set a trial's progress (clamped to 0..1) and its experiment's; commit.

    The experiment's progress is the sum of its trials' progress (finished trials count 1)
    over the number of trials it will run (``searcher.max_trials``, 1 for ``single``, else the
    trials so far). Returns the experiment's new progress.
    """
    if progress != progress:  # NaN
        raise InvalidArgumentError("progress must be a number between 0 and 1, got NaN")
    value = min(1.0, max(0.0, float(progress)))
    trial = get_trial(session, trial_id)
    trial.progress = value
    session.flush()
    searcher = session.scalar(
        select(Experiment.config["searcher"]).where(Experiment.id == trial.experiment_id)
    )
    searcher = searcher if isinstance(searcher, dict) else {}
    finished = Trial.state.in_(("COMPLETED", "CANCELED", "ERROR"))
    done_sum, count = session.execute(
        select(
            func.sum(case((finished, 1.0), else_=func.coalesce(Trial.progress, 0.0))),
            func.count(),
        ).where(Trial.experiment_id == trial.experiment_id)
    ).one()
    expected = 1 if searcher.get("name") == "single" else int(searcher.get("max_trials") or 0)
    denominator = max(expected, int(count or 0), 1)
    exp_progress = min(1.0, float(done_sum or 0.0) / denominator)
    session.execute(
        update(Experiment)
        .where(Experiment.id == trial.experiment_id)
        .values(progress=exp_progress)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return exp_progress


def set_runner_state(session: Session, trial_id: int, state: str) -> None:
    """Record what the trial says it is doing (``runnerState``, at most 255 characters)."""
    trial = get_trial(session, trial_id)
    trial.runner_state = state[:255]
    session.commit()


def report_early_exit(session: Session, trial_id: int, reason: str) -> None:
    """Record why the trial is exiting early (once; a second report is a 400, as Determined)."""
    stored = _EXIT_REASONS.get(reason)
    if stored is None:
        raise InvalidArgumentError(
            f"invalid early exit reason {reason!r}: use one of {', '.join(sorted(_EXIT_REASONS))}"
        )
    trial = get_trial(session, trial_id)
    if trial.early_exit_reason is not None:
        raise InvalidArgumentError(
            f"early exit has already been reported for trial {trial_id} ({trial.early_exit_reason})"
        )
    trial.early_exit_reason = stored
    session.commit()


def merge_run_metadata(old: Mapping[str, Any], new: Mapping[str, Any], path: str = "") -> Any:
    """``new`` merged into ``old``: objects merge key by key, lists are appended to, other values
    replace; a key whose kind changes (object, list, scalar) is refused with a 400."""
    out = dict(old)
    for key, value in new.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in out or out[key] is None or value is None:
            out[key] = value
            continue
        current = out[key]
        if isinstance(current, dict) and isinstance(value, dict):
            out[key] = merge_run_metadata(current, value, where)
        elif isinstance(current, list) and isinstance(value, list):
            out[key] = [*current, *value]
        elif isinstance(current, dict | list) or isinstance(value, dict | list):
            raise InvalidArgumentError(
                f"run metadata: {where!r} cannot change from {type(current).__name__} "
                f"to {type(value).__name__}"
            )
        else:
            out[key] = value
    return out


def get_run_metadata(session: Session, run_id: int) -> dict[str, Any]:
    """A run's (trial's) metadata; ``{}`` when none was set."""
    return dict(get_trial(session, run_id).run_metadata or {})


def post_run_metadata(session: Session, run_id: int, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``metadata`` into the run's metadata (see :func:`merge_run_metadata`); commit."""
    trial = get_trial(session, run_id)
    merged: dict[str, Any] = merge_run_metadata(trial.run_metadata or {}, metadata)
    trial.run_metadata = merged
    session.commit()
    return merged


def storage_config_sha256(config: Mapping[str, Any]) -> str:
    """The id of a checkpoint storage config in ``storage_backends``: the SHA-256 of its
    canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def registered_storage_id(session: Session, config: Any) -> int | None:
    """The id ``runs/start`` answers for checkpoint storage ``config`` when it is already
    registered; None when it is not (or ``config`` is no config dict). Read-only: a trial's
    spec carries it (``STALWART_STORAGE_ID``) so Stalwart's harness need not ask."""
    if not isinstance(config, Mapping):
        return None
    query = select(StorageBackend.id).where(
        StorageBackend.config_sha256 == storage_config_sha256(config)
    )
    found = session.scalar(query)
    return int(found) if found is not None else None


def add_storage_backend(
    session: Session, run_id: int, config: Mapping[str, Any] | None
) -> int | None:
    """``runs/start``: the id of checkpoint storage ``config``, stored once per distinct config.

    Configs are identified by the SHA-256 of their canonical JSON (sorted keys, no spaces); a
    race between two tasks with the same new config is settled by the unique index.
    """
    get_trial(session, run_id)
    if config is None:
        return None
    digest = storage_config_sha256(config)
    query = select(StorageBackend.id).where(StorageBackend.config_sha256 == digest)
    found = session.scalar(query)
    if found is not None:
        return int(found)
    session.add(StorageBackend(config_sha256=digest, config=dict(config)))
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
    found = session.scalar(query)
    if found is None:  # pragma: no cover - the row was just written
        raise NotFoundError("checkpoint storage config could not be stored")
    return int(found)


TRIAL_SOURCE_TYPES = (
    "TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED",
    "TRIAL_SOURCE_INFO_TYPE_INFERENCE",
    "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING",
)
"""``v1TrialSourceInfoType`` values."""


def record_trial_source(
    session: Session,
    *,
    trial_id: int,
    checkpoint_uuid: str,
    source_type: str,
    model_id: int | None,
    model_version: int | None,
) -> TrialSourceInfo:
    """Record (or replace) that ``trial_id`` used ``checkpoint_uuid`` (and a model version).

    Raises :class:`NotFoundError` for an unknown checkpoint, :class:`InvalidArgumentError` for
    an unknown type. Flushes; the caller commits."""
    if source_type not in TRIAL_SOURCE_TYPES:
        raise InvalidArgumentError(
            f"trialSourceInfoType {source_type!r} is not one of {', '.join(TRIAL_SOURCE_TYPES)}"
        )
    if session.get(Checkpoint, checkpoint_uuid) is None:
        raise NotFoundError(f"checkpoint {checkpoint_uuid} not found")
    row = session.get(TrialSourceInfo, (trial_id, checkpoint_uuid))
    if row is None:
        row = TrialSourceInfo(trial_id=trial_id, checkpoint_uuid=checkpoint_uuid)
        session.add(row)
    row.source_type = source_type
    row.model_id = model_id
    row.model_version = model_version
    session.flush()
    return row


SOURCE_METRICS_LIMIT = 1000
"""Most reports answered per linked trial (Determined's ``numMetricsLimit``)."""


def trial_source_metrics(
    session: Session,
    user: User,
    *,
    checkpoint_uuid: str | None = None,
    model_version: tuple[int, int] | None = None,
    source_type: str | None = None,
    group: str | None = None,
) -> list[MetricReport]:
    """The live reports of the trials linked (``trial_source_infos``) to a checkpoint or to a
    ``(model id, version number)``, optionally of one ``source_type`` and one metric ``group``
    (None: every group): per trial, by run then steps, at most :data:`SOURCE_METRICS_LIMIT`.
    Trials whose experiment ``user`` may not view are left out, as on Determined."""
    links = select(TrialSourceInfo.trial_id)
    if checkpoint_uuid is not None:
        links = links.where(TrialSourceInfo.checkpoint_uuid == checkpoint_uuid)
    if model_version is not None:
        links = links.where(
            TrialSourceInfo.model_id == model_version[0],
            TrialSourceInfo.model_version == model_version[1],
        )
    if source_type is not None:
        links = links.where(TrialSourceInfo.source_type == source_type)
    out: list[MetricReport] = []
    for trial_id in session.scalars(links.order_by(TrialSourceInfo.trial_id)).unique():
        trial = session.get(Trial, trial_id)
        experiment = session.get(Experiment, trial.experiment_id) if trial is not None else None
        if experiment is None:
            continue
        try:
            policy.require_view_experiment(session, user, experiment)
        except ForbiddenError:
            continue
        query = select(MetricReport).where(
            MetricReport.trial_id == trial_id, MetricReport.archived.is_(False)
        )
        if group is not None:
            query = query.where(MetricReport.group == group)
        query = query.order_by(
            MetricReport.trial_run_id, MetricReport.steps_completed, MetricReport.id
        ).limit(SOURCE_METRICS_LIMIT)
        out.extend(session.scalars(query))
    return out
