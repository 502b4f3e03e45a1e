"""Stored running summaries of each trial's numeric validation metrics
(``trial_metric_summaries``): min, max, sum, count and the latest value, per trial and metric.

The experiment list sorts and filters 10,000 experiments by a validation metric's summary in
their best trials (:mod:`stalwart.master.services.experiment_columns`); reading every report's
JSON for that costs a parse per report, an indexed row costs a seek. Contract:

- Only the ``validation`` group, and only finite numbers (ints, floats; not booleans, not the
  strings ``"NaN"``/``"Infinity"``) count.
- Kept in the ingest transaction (:func:`stalwart.master.services.metrics.report_metrics_many`
  calls :func:`add_reports`, one upsert per trial and metric of the batch), so a summary is
  never behind the reports it summarizes.
- A rollback (a restarted run archiving later reports) rebuilds the trial's summaries from
  its live reports (:func:`rebuild`).
- ``last``: the value in the latest report that had the metric, by ``steps_completed`` then
  arrival.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import case, delete, select
from sqlalchemy.orm import Session

from stalwart.master.db.bulk import execute_many, upsert_of
from stalwart.master.db.tables import MetricReport, TrialMetricSummary

__all__ = ["GROUP", "add_reports", "rebuild", "summarize_rows"]

GROUP = "validation"

_T = TrialMetricSummary


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def summarize_rows(
    rows: Iterable[tuple[int, int, Mapping[str, Any] | None]],
) -> list[dict[str, Any]]:
    """Summary rows of ``(trial id, steps, metrics)`` reports given in arrival order."""
    out: dict[tuple[int, str], dict[str, Any]] = {}
    for trial_id, steps, metrics in rows:
        for name, raw in (metrics or {}).items():
            value = _finite(raw)
            if value is None:
                continue
            found = out.get((trial_id, name))
            if found is None:
                out[(trial_id, name)] = {
                    "trial_id": trial_id,
                    "group": GROUP,
                    "name": name,
                    "min": value,
                    "max": value,
                    "sum": value,
                    "count": 1,
                    "last": value,
                    "last_steps": steps,
                }
                continue
            found["min"] = min(found["min"], value)
            found["max"] = max(found["max"], value)
            found["sum"] += value
            found["count"] += 1
            if steps >= found["last_steps"]:
                found["last"], found["last_steps"] = value, steps
    return list(out.values())


_TABLE = _T.metadata.tables[_T.__tablename__]
_COLUMNS = ("trial_id", "group", "name", "min", "max", "sum", "count", "last", "last_steps")


def _upsert_statement(dialect: str) -> Any:
    stmt = upsert_of(dialect, _TABLE)
    new = stmt.excluded
    t = _TABLE.c
    newer = new.last_steps >= t.last_steps  # a later report (or the same step, later)
    return stmt.on_conflict_do_update(
        index_elements=[t.trial_id, t.group, t.name],
        set_={
            "min": case((new.min < t.min, new.min), else_=t.min),
            "max": case((new.max > t.max, new.max), else_=t.max),
            "sum": t.sum + new.sum,
            "count": t.count + new.count,
            "last": case((newer, new.last), else_=t.last),
            "last_steps": case((newer, new.last_steps), else_=t.last_steps),
        },
    )


def _upsert(session: Session, summaries: Sequence[dict[str, Any]]) -> None:
    execute_many(
        session, _upsert_statement, _COLUMNS, [tuple(r[c] for c in _COLUMNS) for r in summaries]
    )


def add_reports(session: Session, rows: Sequence[Mapping[str, Any]]) -> None:
    """Fold newly stored report rows (``trial_id``, ``group``, ``steps_completed``,
    ``metrics``; in arrival order) into their trials' summaries."""
    validations = [
        (int(r["trial_id"]), int(r["steps_completed"]), r["metrics"])
        for r in rows
        if r["group"] == GROUP
    ]
    _upsert(session, summarize_rows(validations))


def rebuild(session: Session, trial_ids: Iterable[int]) -> None:
    """Recompute the trials' summaries from their live validation reports."""
    ids = sorted(set(trial_ids))
    if not ids:
        return
    session.execute(delete(_T).where(_T.trial_id.in_(ids)))
    reports = session.execute(
        select(MetricReport.trial_id, MetricReport.steps_completed, MetricReport.metrics)
        .where(
            MetricReport.trial_id.in_(ids),
            MetricReport.group == GROUP,
            MetricReport.archived.is_(False),
        )
        .order_by(MetricReport.trial_id, MetricReport.steps_completed, MetricReport.id)
    )
    _upsert(session, summarize_rows((int(t), int(s), m) for t, s, m in reports))
