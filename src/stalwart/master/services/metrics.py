"""Trial metrics: ingest (the hot path), validation summaries, streams and downsampled series.

Ingest contract (:func:`report_metrics`), one small transaction per report:

1. one ``UPDATE trials ... WHERE id = :trial AND run_id = :run`` raises ``total_batches`` to the
   report's ``stepsCompleted`` and doubles as the run-id check (no row: the trial is unknown, 404,
   or the report comes from an old run, 400 "invalid run id");
2. for a restarted run only (``run_id > 1``), reports of earlier runs at or beyond this step are
   archived (index range scans on ``(trial_id, group, steps_completed)``; as Determined does on
   the first report after a restart);
3. one ``INSERT`` of the report;
4. for ``validation`` reports only: the trial's best searcher metric value is lowered (or
   raised, per ``searcher.smaller_is_better``) by a conditional ``UPDATE``, the trial's stored
   validation summaries are updated (:mod:`stalwart.master.services.metric_summaries`), and the
   experiment's ``best_trial_id`` / ``best_searcher_metric`` are recomputed from its trials
   (:func:`refresh_experiment_best`; what the experiment list sorts and shows);
5. the trial's stored ``summaryMetrics`` and series rollups are updated, or rebuilt from its
   live reports after step 2 archived any (:mod:`stalwart.master.services.series_store`).

:func:`report_metrics_many` stores a batch of reports (any trials) the same way in one
transaction: one run-id check per trial, one multi-row ``INSERT``, all or none. No big row is
read or rewritten. A report identical to a stored one (same trial, run, group, step,
``reportTime`` and metrics; the harness stamps each report's time once) is not stored again, so a
batch sent twice (a retry whose first attempt was stored, even one still in flight beside it
when the retry arrived: the check runs under the ingest's serialization) is stored once; reports
without a ``reportTime`` are always stored. Values travel as sent: the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` stay strings (non-finite floats are turned into
them), so the stored JSON is valid on every database. Latest and best validations are derived
when read (:func:`validation_summaries`), batched for a whole page of trials.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import sqlite3
import threading
import typing
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Engine,
    String,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    tuple_,
    type_coerce,
    update,
)
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Experiment, MetricReport, Trial, utcnow
from stalwart.master.services import metric_summaries, series_store

if TYPE_CHECKING:
    from stalwart.master.api.models.trials import ReportTrialMetricsRequest

__all__ = [
    "TRAINING",
    "VALIDATION",
    "MetricsInput",
    "MetricsTextRow",
    "ReportResult",
    "ReportRow",
    "SeriesPoint",
    "ValidationSummary",
    "check_report",
    "downsample_lttb",
    "ingest_lock",
    "iter_metrics_text",
    "iter_report_rows",
    "lock_validations",
    "lttb_indices",
    "metric_series",
    "parse_metric_value",
    "refresh_experiment_best",
    "report_metrics",
    "report_metrics_many",
    "require_trials",
    "sanitize_metrics",
    "searcher_settings",
    "validation_summaries",
    "wire_input",
]

TRAINING = "training"
VALIDATION = "validation"
MAX_GROUP_LENGTH = 64
STREAM_BATCH = 1000

_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass(frozen=True)
class ReportResult:
    """What a stored report changed (for the searcher driver: validations of which trial)."""

    trial_id: int
    experiment_id: int
    group: str
    steps_completed: int
    searcher_value: float | None
    """The report's searcher metric value (validation reports; None when absent or NaN)."""


@dataclass(frozen=True)
class ValidationSummary:
    """The latest validation report of a trial and the one with its best searcher metric."""

    latest: MetricReport | None
    best: MetricReport | None


@dataclass(frozen=True)
class SeriesPoint:
    batches: int
    value: float
    time: dt.datetime


def parse_metric_value(value: Any) -> float | None:
    """A metric value as a float: numbers and "NaN"/"Infinity"/"-Infinity"; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value in _SPECIAL:
        return _SPECIAL[value]
    return None


def _sanitize(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): _sanitize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sanitize(v) for v in value]
    return value


def sanitize_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics`` with non-finite floats as the wire strings (valid JSON everywhere)."""
    return {str(k): _sanitize(v) for k, v in metrics.items()}


def searcher_settings(config: Mapping[str, Any] | None) -> tuple[str | None, bool]:
    """``(searcher.metric, searcher.smaller_is_better)`` of an experiment config."""
    searcher = (config or {}).get("searcher") or {}
    metric = searcher.get("metric")
    smaller = searcher.get("smaller_is_better")
    return (str(metric) if metric else None), (True if smaller is None else bool(smaller))


_TRIALS = Trial.metadata.tables[Trial.__tablename__]
_REPORTS = MetricReport.metadata.tables[MetricReport.__tablename__]
_STEPS = bindparam("steps", type_=BigInteger)
_BUMP_TRIAL = (
    update(_TRIALS)
    .where(_TRIALS.c.id == bindparam("trial"), _TRIALS.c.run_id == bindparam("run"))
    .values(
        total_batches=case(
            (_TRIALS.c.total_batches < _STEPS, _STEPS), else_=_TRIALS.c.total_batches
        )
    )
    .returning(_TRIALS.c.experiment_id)
)
"""Raise ``total_batches`` if the run is current; built once (the hot path skips statement
construction and reuses the compiled form from the cache)."""
_INSERT_REPORT = insert(_REPORTS)
_INSERT_REPORT_RETURNING = _INSERT_REPORT.returning(_REPORTS.c.id, sort_by_parameter_order=True)


def _insert_reports(connection: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert report rows; their ids in the order given (the stored series name them). On
    SQLite the batch is one ``executemany`` inside the one write transaction, so its ids are
    consecutive and end at ``last_insert_rowid()`` (``RETURNING`` would make SQLAlchemy send
    batched multi-row statements instead, about a third slower); PostgreSQL's sequence may
    interleave with other writers, so there the ids come back with the rows."""
    if connection.dialect.name != "sqlite":
        return [int(i) for i in connection.execute(_INSERT_REPORT_RETURNING, rows).scalars()]
    connection.execute(_INSERT_REPORT, rows)
    last = int(connection.exec_driver_sql("select last_insert_rowid()").scalar_one())
    return list(range(last - len(rows) + 1, last + 1))


_SQLITE_WRITE_LOCKS: weakref.WeakKeyDictionary[Engine, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _write_lock(session: Session) -> contextlib.AbstractContextManager[Any]:
    """On SQLite, one in-process lock per engine around each report's write transaction.

    SQLite has one writer at a time; without this, concurrent reports meet in SQLite's busy
    handler, which sleeps for milliseconds between retries. A Python lock hands over at once.
    """
    bind = session.get_bind()
    engine = bind if isinstance(bind, Engine) else bind.engine
    if engine.dialect.name != "sqlite":
        return contextlib.nullcontext()
    with _LOCKS_GUARD:
        lock = _SQLITE_WRITE_LOCKS.get(engine)
        if lock is None:
            lock = _SQLITE_WRITE_LOCKS[engine] = threading.Lock()
    return lock


@contextlib.contextmanager
def ingest_lock(session: Session, trial_ids: Iterable[int]) -> Iterator[None]:
    """Serialize the caller's writes about ``trial_ids`` with the ingest of their reports: on
    SQLite the ingest's lock, on PostgreSQL the trials' row locks (what the ingest's first
    ``UPDATE trials`` takes), held until the caller commits or rolls back in the block."""
    with _write_lock(session):
        if session.get_bind().dialect.name == "postgresql":
            session.execute(
                select(Trial.id)
                .where(Trial.id.in_(sorted(set(trial_ids))))
                .order_by(Trial.id)
                .with_for_update()
            )
        yield


_VALIDATION_LOCK_CLASS = 0x53_57  # "SW": the advisory-lock namespace of validation inserts


def lock_validations(session: Session, experiment_ids: Iterable[int]) -> None:
    """On PostgreSQL, serialize the transactions that insert validation reports of the same
    experiment (a transaction-scoped advisory lock per experiment, taken in id order).

    The searcher driver reads validations by id after a cursor; ids come from a sequence, so
    without this two concurrent transactions could commit out of id order and the driver would
    skip the one that commits second. With it, each experiment's validation ids become visible in
    increasing order. SQLite has one writer at a time already.
    """
    bind = session.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for experiment_id in sorted(set(experiment_ids)):
        session.execute(
            text("select pg_advisory_xact_lock(:cls, :obj)"),
            {"cls": _VALIDATION_LOCK_CLASS, "obj": experiment_id},
        )


def _report_time(text: str | None) -> dt.datetime:
    if not text:
        return utcnow()
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(f"reportTime {text!r} is not an RFC 3339 time") from None
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed


def _bad_run(session: Session, trial_id: int, run_id: int) -> Exception:
    current = session.scalar(select(Trial.run_id).where(Trial.id == trial_id))
    if current is None:
        return NotFoundError(f"trial {trial_id} not found")
    return InvalidArgumentError(
        f"invalid run id: trial {trial_id} is on run {current}, the report came from run "
        f"{run_id} (a stale process of an earlier run?)"
    )


def _archive_superseded(
    session: Session, trial_id: int, run_id: int, group: str, steps: int
) -> tuple[int, int]:
    """Archive earlier runs' reports at or beyond ``steps``; the numbers archived in
    validation and in the other groups."""
    groups = {group, TRAINING} - {VALIDATION}
    common = (
        MetricReport.trial_id == trial_id,
        MetricReport.trial_run_id < run_id,
        MetricReport.steps_completed >= steps,
        MetricReport.archived.is_(False),
    )
    stmt = update(MetricReport).values(archived=True).execution_options(synchronize_session=False)
    others = session.execute(stmt.where(MetricReport.group.in_(sorted(groups)), *common))
    result = session.execute(stmt.where(MetricReport.group == VALIDATION, *common))
    return _rowcount(result), _rowcount(others)


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


def _recompute_best(session: Session, trial_id: int, metric: str | None, smaller: bool) -> None:
    best: float | None = None
    if metric:
        rows = session.execute(
            select(MetricReport.metrics).where(
                MetricReport.trial_id == trial_id,
                MetricReport.group == VALIDATION,
                MetricReport.archived.is_(False),
            )
        )
        for (metrics,) in rows:
            value = parse_metric_value((metrics or {}).get(metric))
            if value is None or math.isnan(value):
                continue
            if best is None or (value < best if smaller else value > best):
                best = value
    session.execute(
        update(Trial)
        .where(Trial.id == trial_id)
        .values(searcher_metric_value=best)
        .execution_options(synchronize_session=False)
    )


@dataclass(frozen=True)
class MetricsInput:
    """One report as a task sends it (``v1TrialMetrics`` plus its group)."""

    trial_id: int
    run_id: int
    group: str
    steps_completed: int
    avg_metrics: Mapping[str, Any]
    batch_metrics: Sequence[Mapping[str, Any]] | None = None
    report_time: str | None = None


def wire_input(body: ReportTrialMetricsRequest) -> MetricsInput:
    """A report as the wire carries it (the single-report body, or a batch's item)."""
    report = body.metrics
    return MetricsInput(
        trial_id=report.trial_id,
        run_id=report.trial_run_id,
        group=body.group,
        steps_completed=report.steps_completed or 0,
        avg_metrics=report.metrics.avg_metrics,
        batch_metrics=report.metrics.batch_metrics,
        report_time=report.report_time,
    )


def check_report(report: MetricsInput) -> None:
    """Refuse (InvalidArgumentError, a 400) a report the master never stores, whatever its
    trial: a bad group name or step count."""
    if not report.group or len(report.group) > MAX_GROUP_LENGTH:
        raise InvalidArgumentError(
            f"metric group must be 1 to {MAX_GROUP_LENGTH} characters, got {report.group!r}"
        )
    if report.steps_completed < 0:
        raise InvalidArgumentError(f"stepsCompleted must be >= 0, got {report.steps_completed}")


def _row(report: MetricsInput) -> dict[str, Any]:
    """The ``metric_reports`` row of a report, after checking it (400s)."""
    check_report(report)
    batches = report.batch_metrics
    return {
        "trial_id": report.trial_id,
        "trial_run_id": report.run_id,
        "group": report.group,
        "steps_completed": report.steps_completed,
        "report_time": _report_time(report.report_time),
        "metrics": sanitize_metrics(report.avg_metrics),
        "batch_metrics": [sanitize_metrics(b) for b in batches] if batches else None,
        "archived": False,
    }


def report_metrics(
    session: Session,
    *,
    trial_id: int,
    run_id: int,
    group: str,
    steps_completed: int,
    avg_metrics: Mapping[str, Any],
    batch_metrics: Sequence[Mapping[str, Any]] | None = None,
    report_time: str | None = None,
) -> ReportResult:
    """Store one metrics report of ``trial_id`` and commit (see the module docstring)."""
    report = MetricsInput(
        trial_id, run_id, group, steps_completed, avg_metrics, batch_metrics, report_time
    )
    return report_metrics_many(session, [report])[0]


def report_metrics_many(
    session: Session, reports: Sequence[MetricsInput], *, commit: bool = True
) -> list[ReportResult]:
    """Store reports (of any trials) in one transaction, all or none, and commit (with
    ``commit=False`` the caller commits: its transaction must have written nothing before,
    as a refused report rolls it back).

    Per trial: one run-id check that also raises ``total_batches``; per restarted run and
    group: one archive of superseded reports; then one multi-row ``INSERT``; then, for trials
    with validation reports, one conditional update of the best searcher metric value.
    Reports already stored are left out (module docstring).
    """
    rows = [_row(report) for report in reports]
    if not rows:
        return []
    furthest: dict[tuple[int, int], int] = {}
    earliest: dict[tuple[int, int, str], int] = {}
    for row in rows:
        trial_run = (row["trial_id"], row["trial_run_id"])
        furthest[trial_run] = max(furthest.get(trial_run, 0), row["steps_completed"])
        key = (*trial_run, row["group"])
        earliest[key] = min(earliest.get(key, row["steps_completed"]), row["steps_completed"])
    with _write_lock(session):
        connection = session.connection()
        experiment_of: dict[int, int] = {}
        for (trial_id, run_id), steps in sorted(furthest.items()):
            bumped = connection.execute(
                _BUMP_TRIAL, {"trial": trial_id, "run": run_id, "steps": steps}
            ).first()
            if bumped is None:
                session.rollback()
                raise _bad_run(session, trial_id, run_id)
            experiment_of[trial_id] = int(bumped[0])
        lock_validations(
            session, {experiment_of[r["trial_id"]] for r in rows if r["group"] == VALIDATION}
        )
        rolled_back: set[int] = set()  # validation reports archived
        archived: set[int] = set()  # any reports archived
        for (trial_id, run_id, group), steps in sorted(earliest.items()):
            if run_id > 1:
                validations, others = _archive_superseded(session, trial_id, run_id, group, steps)
                if validations:
                    rolled_back.add(trial_id)
                if validations or others:
                    archived.add(trial_id)
        fresh = _not_stored(connection, rows, reports)
        ids = _insert_reports(connection, fresh) if fresh else []
        # what reads use (after the insert: a rebuild reads the new rows too)
        metric_summaries.rebuild(session, rolled_back)
        metric_summaries.add_reports(
            session, [r for r in fresh if r["trial_id"] not in rolled_back]
        )
        series_store.add_reports(
            session,
            [
                (int(report_id), r["trial_id"], r["group"], r["steps_completed"], r["metrics"])
                for report_id, r in zip(ids, fresh, strict=True)
            ],
            rebuilt=archived,
        )
        values = _update_best(session, rows, experiment_of, rolled_back)
        if commit:
            session.commit()
    return [
        ReportResult(
            row["trial_id"],
            experiment_of[row["trial_id"]],
            row["group"],
            row["steps_completed"],
            value,
        )
        for row, value in zip(rows, values, strict=True)
    ]


def _not_stored(
    connection: Any, rows: list[dict[str, Any]], reports: Sequence[MetricsInput]
) -> list[dict[str, Any]]:
    """The rows of a batch that are not stored yet (one indexed range read per trial and group;
    empty for new steps); rows without a client ``reportTime`` are always kept."""
    keyed = [row for row, report in zip(rows, reports, strict=True) if report.report_time]
    if not keyed:
        return rows
    ranges: dict[tuple[int, str], tuple[int, int]] = {}
    for row in keyed:
        key = (row["trial_id"], row["group"])
        low, high = ranges.get(key, (row["steps_completed"], row["steps_completed"]))
        ranges[key] = (min(low, row["steps_completed"]), max(high, row["steps_completed"]))
    c = _REPORTS.c
    found = connection.execute(
        select(c.trial_id, c.trial_run_id, c.group, c.steps_completed, c.report_time, c.metrics)
        .where(
            or_(
                *(
                    and_(c.trial_id == t, c.group == g, c.steps_completed.between(lo, hi))
                    for (t, g), (lo, hi) in ranges.items()
                )
            )
        )
        .where(c.archived.is_(False))
    ).all()
    stored = {
        (r.trial_id, r.trial_run_id, r.group, r.steps_completed, r.report_time): r.metrics
        for r in found
    }
    fresh = []
    for row, report in zip(rows, reports, strict=True):
        same = (
            row["trial_id"],
            row["trial_run_id"],
            row["group"],
            row["steps_completed"],
            row["report_time"],
        )
        if not report.report_time or stored.get(same) != row["metrics"]:
            fresh.append(row)
    return fresh


def _update_best(
    session: Session,
    rows: Sequence[Mapping[str, Any]],
    experiment_of: Mapping[int, int],
    rolled_back: set[int],
) -> list[float | None]:
    """Lower (or raise) each trial's best searcher metric value; each row's value."""
    values: list[float | None] = [None] * len(rows)
    trials = {r["trial_id"] for r in rows if r["group"] == VALIDATION} | rolled_back
    if not trials:
        return values
    experiments = sorted({experiment_of[t] for t in trials})
    settings = {
        exp_id: searcher_settings({"searcher": searcher})
        for exp_id, searcher in session.execute(
            select(Experiment.id, Experiment.config["searcher"]).where(
                Experiment.id.in_(experiments)
            )
        )
    }
    for trial_id in sorted(rolled_back):
        _recompute_best(session, trial_id, *settings.get(experiment_of[trial_id], (None, True)))
    best: dict[int, float] = {}
    for i, row in enumerate(rows):
        if row["group"] != VALIDATION:
            continue
        metric, smaller = settings.get(experiment_of[row["trial_id"]], (None, True))
        value = parse_metric_value(row["metrics"].get(metric)) if metric else None
        if value is None or math.isnan(value):
            continue
        values[i] = value
        current = best.get(row["trial_id"])
        if current is None or (value < current if smaller else value > current):
            best[row["trial_id"]] = value
    for trial_id, value in sorted(best.items()):
        _, smaller = settings.get(experiment_of[trial_id], (None, True))
        better = (
            Trial.searcher_metric_value > value
            if smaller
            else (Trial.searcher_metric_value < value)
        )
        session.execute(
            update(Trial)
            .where(Trial.id == trial_id, or_(Trial.searcher_metric_value.is_(None), better))
            .values(searcher_metric_value=value)
            .execution_options(synchronize_session=False)
        )
    refresh_experiment_best(
        session, {experiment_of[t]: settings.get(experiment_of[t], (None, True))[1] for t in trials}
    )
    return values


def refresh_experiment_best(session: Session, smaller_is_better: Mapping[int, bool]) -> None:
    """Recompute each experiment's ``best_trial_id`` and ``best_searcher_metric`` from its
    trials' ``searcher_metric_value`` (``{experiment id: searcher.smaller_is_better}``): the
    best value, ties to the lowest trial id; both null when no trial has one. One ``UPDATE``
    per experiment, in the caller's transaction (the one door that changes trial values)."""
    for experiment_id, smaller in sorted(smaller_is_better.items()):
        value = Trial.searcher_metric_value
        best = (
            select(Trial.id, value)
            .where(Trial.experiment_id == experiment_id, value.is_not(None))
            .order_by(value.asc() if smaller else value.desc(), Trial.id.asc())
            .limit(1)
        )
        found = session.execute(best).first()
        session.execute(
            update(Experiment)
            .where(Experiment.id == experiment_id)
            .values(
                best_trial_id=found[0] if found else None,
                best_searcher_metric=found[1] if found else None,
            )
            .execution_options(synchronize_session=False)
        )


def _json_path_safe(key: str) -> bool:
    """Whether the database may look ``key`` up in a JSON path. Stored JSON escapes every
    character outside printable ASCII (``json.dumps``), and SQLite matches a path's label
    against the key's text as stored, escapes unresolved: such keys are read by decoding whole
    reports instead."""
    return key.isascii() and key.isprintable() and '"' not in key and "\\" not in key


def validation_summaries(
    session: Session, trial_ids: Iterable[int], metric: str | None, smaller_is_better: bool
) -> dict[int, ValidationSummary]:
    """Latest and best (by ``metric``) validation report of each trial, in two queries.

    The first query reads only ids, steps and the searcher metric's value (extracted by the
    database) of the trials' validation reports; the second loads the chosen reports.
    """
    ids = sorted(set(trial_ids))
    if not ids:
        return {}
    narrow = metric is not None and _json_path_safe(metric)
    value_col = MetricReport.metrics[metric] if narrow and metric else MetricReport.metrics
    rows = session.execute(
        select(MetricReport.id, MetricReport.trial_id, MetricReport.steps_completed, value_col)
        .where(
            MetricReport.trial_id.in_(ids),
            MetricReport.group == VALIDATION,
            MetricReport.archived.is_(False),
        )
        .order_by(MetricReport.trial_id, MetricReport.steps_completed, MetricReport.id)
    )
    latest: dict[int, int] = {}
    best: dict[int, tuple[float, int]] = {}
    for report_id, trial_id, _steps, raw in rows:
        latest[trial_id] = report_id  # rows come in step order: the last one wins
        if metric is None:
            continue
        value = parse_metric_value(raw if narrow else (raw or {}).get(metric))
        if value is None or math.isnan(value):
            continue
        current = best.get(trial_id)
        if current is None or (value < current[0] if smaller_is_better else value > current[0]):
            best[trial_id] = (value, report_id)
    wanted = set(latest.values()) | {rid for _, rid in best.values()}
    reports = {
        r.id: r
        for r in session.scalars(select(MetricReport).where(MetricReport.id.in_(sorted(wanted))))
    }
    out: dict[int, ValidationSummary] = {}
    for trial_id in ids:
        latest_id = latest.get(trial_id)
        best_entry = best.get(trial_id)
        out[trial_id] = ValidationSummary(
            latest=reports.get(latest_id) if latest_id is not None else None,
            best=reports.get(best_entry[1]) if best_entry is not None else None,
        )
    return out


def require_trials(session: Session, trial_ids: Iterable[int]) -> None:
    """NotFoundError naming the first of ``trial_ids`` that does not exist."""
    wanted = set(trial_ids)
    found = set(session.scalars(select(Trial.id).where(Trial.id.in_(sorted(wanted)))))
    missing = sorted(wanted - found)
    if missing:
        raise NotFoundError(f"trial {missing[0]} not found")


ReportRow = tuple[int, int, int, int, "str | dt.datetime", str | None, str | None]
"""A stored report as plain columns, for the streams (no ORM object, no decoded JSON):
``(id, trial_id, trial_run_id, steps_completed, report_time, metrics, batch_metrics)``.

``report_time`` is what the driver answers: the stored text on SQLite
(``YYYY-MM-DD HH:MM:SS.ffffff``, UTC), a timezone-aware datetime on PostgreSQL. ``metrics`` and
``batch_metrics`` are the stored JSON text (None for SQL NULL)."""

_ROW_COLUMNS = (
    _REPORTS.c.id,
    _REPORTS.c.trial_id,
    _REPORTS.c.trial_run_id,
    _REPORTS.c.steps_completed,
    # No result processing: SQLite answers its stored text, PostgreSQL a datetime.
    type_coerce(_REPORTS.c.report_time, String).label("report_time"),
    # The JSON columns as their stored text (PostgreSQL's json type keeps it verbatim).
    cast(_REPORTS.c.metrics, Text).label("metrics"),
    cast(_REPORTS.c.batch_metrics, Text).label("batch_metrics"),
)


def _after(steps: int, report_id: int) -> Any:
    """Keyset condition: after ``(steps, report_id)`` in series order. A row-value comparison
    (the OR of two conditions made SQLite read 3 times slower), with the redundant bound on
    ``steps_completed`` that lets either database start the index range there."""
    c = _REPORTS.c
    return and_(
        c.steps_completed >= steps,
        tuple_(c.steps_completed, c.id) > tuple_(literal(steps), literal(report_id)),
    )


def iter_report_rows(
    sessions: SessionFactory, trial_ids: Sequence[int], group: str, batch: int = STREAM_BATCH
) -> Iterator[list[ReportRow]]:
    """Batches of the trials' live (not archived) reports of ``group``, trial by trial, in step
    order, as :data:`ReportRow` tuples of plain columns (keyset paging on the series index, each
    batch in its own short session), without building ORM objects or decoding the JSON
    columns."""
    c = _REPORTS.c
    for trial_id in trial_ids:
        last: ReportRow | None = None
        while True:
            query = select(*_ROW_COLUMNS).where(
                c.trial_id == trial_id, c.group == group, c.archived.is_(False)
            )
            if last is not None:
                query = query.where(_after(last[3], last[0]))
            query = query.order_by(c.steps_completed, c.id).limit(batch)
            with sessions() as session:
                rows = _cast_rows(session.execute(query).all())
            if not rows:
                break
            yield rows
            if len(rows) < batch:
                break
            last = rows[-1]


MetricsTextRow = tuple[int, int, int, int, str | None]
"""A stored report for the columnar export, as the database driver answers it:
``(trial_id, trial_run_id, steps_completed, report time in microseconds since the epoch (UTC),
the stored metrics JSON text)``."""

_METRICS_TEXT_SQL = {
    # The stored text is 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC): whole seconds, then the digits.
    "sqlite": (
        "SELECT trial_id, trial_run_id, steps_completed, "
        "CAST(strftime('%s', report_time) AS INTEGER) * 1000000 "
        "+ CAST(substr(report_time, 21, 6) AS INTEGER), metrics "
        'FROM metric_reports WHERE trial_id = ? AND "group" = ? AND NOT archived '
        "ORDER BY steps_completed, id"
    ),
    "postgresql": (
        "SELECT trial_id, trial_run_id, steps_completed, "
        "(extract(epoch FROM report_time) * 1000000)::bigint, metrics::text "
        'FROM metric_reports WHERE trial_id = %s AND "group" = %s AND NOT archived '
        "ORDER BY steps_completed, id"
    ),
}


def iter_metrics_text(
    sessions: SessionFactory, trial_ids: Sequence[int], group: str, batch: int
) -> Iterator[list[MetricsTextRow]]:
    """The trials' live reports of ``group``, trial by trial in step order, in lists of at
    most ``batch`` :data:`MetricsTextRow` (no per-batch metrics, no ORM rows: one query per
    trial on the driver's own cursor, read ``batch`` rows at a time in one read transaction),
    for the columnar export."""
    for trial_id in trial_ids:
        with sessions() as session:
            connection = session.connection()
            sql = _METRICS_TEXT_SQL[connection.dialect.name]
            cursor = connection.connection.cursor()
            try:
                cursor.execute(sql, (trial_id, group))
                while rows := cursor.fetchmany(batch):
                    yield typing.cast("list[MetricsTextRow]", rows)
            finally:
                cursor.close()


def _cast_rows(rows: Sequence[Any]) -> list[ReportRow]:
    """``rows`` typed as :data:`ReportRow` (SQLAlchemy rows unpack as tuples; not copied)."""
    return typing.cast("list[ReportRow]", rows)


def _number_text(session: Session, metric: str) -> Any:
    """SQL for ``metric``'s value in each report as JSON text (``0.25``, ``"NaN"``, ``true``,
    ``{...}``; NULL when absent): numbers keep the exact digits that were stored, so
    :func:`_finite` parses them as ``json.loads`` would. SQLite before 3.38 lacks ``->``: there
    the value is extracted only where it is a JSON number."""
    path = '$."' + metric + '"'
    if session.get_bind().dialect.name == "postgresql":
        return cast(MetricReport.metrics[metric], Text)
    if sqlite3.sqlite_version_info >= (3, 38):
        return type_coerce(_REPORTS.c.metrics, Text).op("->")(literal(path, String))
    number = func.json_type(_REPORTS.c.metrics, path).in_(["integer", "real"])
    return case((number, func.json_extract(_REPORTS.c.metrics, path)))


def _finite(raw: Any) -> float | None:
    """The finite float a JSON number's text (or an SQL number) stands for; None for anything
    else: strings (the "NaN"/"Infinity" markers included), booleans, null, objects, arrays,
    and numbers too large for a float. What :func:`parse_metric_value` keeps, less non-finite
    values."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if value - value == 0 else None


def metric_series(
    session: Session,
    trial_id: int,
    *,
    group: str,
    metric: str,
    max_points: int,
    start_batches: int | None = None,
    end_batches: int | None = None,
) -> tuple[int, list[SeriesPoint]]:
    """``(total, points)``: one metric of one trial over steps, at most ``max_points`` points.

    Reads steps, ids and the value as JSON text (extracted by the database) in index order,
    keeps the series' shape with largest-triangle-three-buckets downsampling, then reads the
    report times of the kept points only. Values that are not finite numbers are left out.
    The answer is kept per database (:class:`_SeriesCache`) and given again while the trial's
    reports are unchanged (one index-only count of them checks it).
    """
    if max_points < 3:
        raise InvalidArgumentError(f"maxPoints must be at least 3, got {max_points}")
    trial = session.get(Trial, trial_id)
    if trial is None:
        raise NotFoundError(f"trial {trial_id} not found")
    c = _REPORTS.c
    newest, count = session.execute(
        select(func.max(c.id), func.count()).where(c.trial_id == trial_id)
    ).one()
    version = (trial.task_id, trial.start_time, newest, count)
    key = (trial_id, group, metric, max_points, start_batches, end_batches)
    cache = _series_cache(session)
    hit = cache.get(key, version)
    if hit is not None:
        return hit[0], list(hit[1])
    total, points = _read_series(
        session, trial_id, group, metric, max_points, start_batches, end_batches
    )
    if len(points) <= _CACHED_POINTS:
        cache.put(key, version, (total, tuple(points)))
    return total, points


_CACHED_POINTS = 10_000
"""The most points of an answer that is kept (the UI asks for at most 10,000)."""


class _SeriesCache:
    """The last downsampled series answered (at most ``size``, least recently used out first)
    per (trial, group, metric, points, window), with the version of the trial's reports they
    were read at: the trial's task and start, its newest report id and its number of reports,
    over all groups (a restarted run archives reports of other groups, in the transaction that
    inserts its first report; a report committed out of id order on PostgreSQL changes the
    count). Unchanged, the series is not read again."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[
            tuple[Any, ...], tuple[tuple[Any, ...], tuple[int, tuple[SeriesPoint, ...]]]
        ] = OrderedDict()

    def get(
        self, key: tuple[Any, ...], version: tuple[Any, ...]
    ) -> tuple[int, tuple[SeriesPoint, ...]] | None:
        with self._lock:
            found = self._items.get(key)
            if found is None or found[0] != version:
                return None
            self._items.move_to_end(key)
            return found[1]

    def put(
        self,
        key: tuple[Any, ...],
        version: tuple[Any, ...],
        value: tuple[int, tuple[SeriesPoint, ...]],
    ) -> None:
        with self._lock:
            self._items[key] = (version, value)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_SERIES_CACHES: weakref.WeakKeyDictionary[Engine, _SeriesCache] = weakref.WeakKeyDictionary()


def _series_cache(session: Session) -> _SeriesCache:
    """The series cache of the session's database (one per engine, so that masters of other
    databases in one process, as in the tests, never share one)."""
    bind = session.get_bind()
    engine = bind if isinstance(bind, Engine) else bind.engine
    with _LOCKS_GUARD:
        cache = _SERIES_CACHES.get(engine)
        if cache is None:
            cache = _SERIES_CACHES[engine] = _SeriesCache()
    return cache


def _read_series(
    session: Session,
    trial_id: int,
    group: str,
    metric: str,
    max_points: int,
    start_batches: int | None,
    end_batches: int | None,
) -> tuple[int, list[SeriesPoint]]:
    """:func:`metric_series` read from the database: from the stored rollups when the whole
    series is asked for and it is too long to read whole, else from the reports."""
    if start_batches is None and end_batches is None:
        versions = series_store.series_versions(session, [trial_id], group, metric)
        rolled = series_store.rolled_series(session, versions, group, metric, max_points)
        if trial_id in rolled:
            found = rolled[trial_id]
            keep = found.kept(max_points)
            times = _report_times(session, [found.reports[i] for i in keep])
            return found.total, [
                SeriesPoint(found.steps[i], found.values[i], times[found.reports[i]]) for i in keep
            ]
    narrow = _json_path_safe(metric)
    c = _REPORTS.c
    value_col = _number_text(session, metric) if narrow else cast(c.metrics, Text)
    query = select(c.steps_completed, c.id, value_col).where(
        c.trial_id == trial_id, c.group == group, c.archived.is_(False)
    )
    if start_batches is not None:
        query = query.where(c.steps_completed >= start_batches)
    if end_batches is not None:
        query = query.where(c.steps_completed <= end_batches)
    steps: list[int] = []
    ids: list[int] = []
    values: list[float] = []
    for step, report_id, raw in session.execute(query.order_by(c.steps_completed, c.id)).all():
        if narrow:
            value = _finite(raw)
        else:
            parsed = parse_metric_value((json.loads(raw) or {}).get(metric) if raw else None)
            value = parsed if parsed is not None and math.isfinite(parsed) else None
        if value is not None:
            steps.append(step)
            ids.append(report_id)
            values.append(value)
    keep = lttb_indices([float(x) for x in steps], values, max_points)
    times = _report_times(session, [ids[i] for i in keep])
    return len(values), [SeriesPoint(int(steps[i]), values[i], times[ids[i]]) for i in keep]


def _report_times(session: Session, report_ids: Sequence[int]) -> dict[int, dt.datetime]:
    """The report time of each of the reports."""
    times: dict[int, dt.datetime] = {}
    for chunk in range(0, len(report_ids), _IDS_PER_QUERY):
        query_times = select(MetricReport.id, MetricReport.report_time).where(
            MetricReport.id.in_(report_ids[chunk : chunk + _IDS_PER_QUERY])
        )
        times.update((report_id, when) for report_id, when in session.execute(query_times))
    return times


_IDS_PER_QUERY = 10_000
"""Ids bound in one ``IN`` list (SQLite allows 32,766 parameters)."""


def downsample_lttb(points: Sequence[tuple[float, float]], threshold: int) -> list[int]:
    """Indices of at most ``threshold`` points that keep the shape of an x-sorted series.

    Largest-triangle-three-buckets (Steinarsson, 2013): the first and last points are kept; the
    rest is cut into ``threshold - 2`` buckets and from each the point forming the largest
    triangle with the previously kept point and the next bucket's average is kept.
    """
    return lttb_indices([p[0] for p in points], [p[1] for p in points], threshold)


def lttb_indices(xs: Sequence[float], ys: Sequence[float], threshold: int) -> list[int]:
    """:func:`downsample_lttb` of the points ``zip(xs, ys)``: the same indices, computed with
    the same float operations in the same order, on two flat lists (about 4 times faster)."""
    n = len(xs)
    if threshold >= n or threshold < 3:
        return list(range(n))
    keep = [0]
    width = (n - 2) / (threshold - 2)
    previous = 0
    for bucket in range(threshold - 2):
        start = int(bucket * width) + 1
        stop = int((bucket + 1) * width) + 1
        next_start, next_stop = stop, min(int((bucket + 2) * width) + 1, n)
        if next_start >= next_stop:
            next_start, next_stop = n - 1, n
        span = next_stop - next_start
        avg_x = sum(xs[next_start:next_stop]) / span
        avg_y = sum(ys[next_start:next_stop]) / span
        ax = xs[previous]
        ay = ys[previous]
        dx = ax - avg_x
        dy = avg_y - ay
        chosen, largest = start, -1.0
        for i in range(start, min(stop, n - 1)):
            area = abs(dx * (ys[i] - ay) - (ax - xs[i]) * dy)
            if area > largest:
                chosen, largest = i, area
        keep.append(chosen)
        previous = chosen
    keep.append(n - 1)
    return keep
