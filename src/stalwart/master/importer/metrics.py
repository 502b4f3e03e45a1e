"""Metrics, in bulk.

Determined keeps each report in one of the ``metrics`` partitions: ``raw_steps`` (training:
``{"avg_metrics": ..., "batch_metrics": [...]}``), ``raw_validations`` (``{"validation_metrics":
...}``) and ``generic_metrics`` (custom groups: ``{"avg_metrics": ...}``), all numbered by one
sequence. Each becomes one ``metric_reports`` row with its group, steps (``total_batches``),
time, run and archived flag; the metrics JSON goes from one database to the other as text,
never decoded (:meth:`~stalwart.master.importer.source.DeterminedSource.metrics`).

Per trial, reports are read in id order through a server-side cursor and written
:data:`BATCH` at a time (PostgreSQL: ``COPY``; SQLite: one ``executemany``); each batch commits
with the trial's watermark (kind ``metrics``: the highest Determined metrics id imported), so
an interrupted import resumes after the last committed batch and a second import reads only
newer reports. A million reports take well under a minute on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, String, Text

from stalwart.master.db.tables import UtcDateTime, utcnow
from stalwart.master.importer.bulk import write_rows
from stalwart.master.importer.context import Context, aware
from stalwart.master.importer.source import Row

__all__ = ["BATCH", "import_metrics"]

BATCH = 10_000
"""Reports per write and commit."""

_COLUMNS = (
    ("trial_id", Integer()),
    ("trial_run_id", Integer()),
    ("group", String()),
    ("steps_completed", BigInteger()),
    ("report_time", UtcDateTime()),
    ("metrics", Text()),
    ("batch_metrics", Text()),
    ("archived", Boolean()),
)
"""``metric_reports``'s columns, the JSON ones as text: the stored JSON text goes in verbatim."""


def _values(trial_id: int, row: Row) -> tuple[Any, ...]:
    return (
        trial_id,
        int(row["trial_run_id"] or 0),
        str(row["metric_group"]),
        int(row["total_batches"] or 0),
        aware(row["end_time"]) or utcnow(),
        row["metrics_text"],
        row["batch_text"],
        bool(row["archived"]),
    )


def import_metrics(ctx: Context) -> None:
    """The metrics of every imported trial that are not here yet."""
    pending = []
    for old, new in ctx.trials:
        mark = int(ctx.ids.get("metrics", old) or 0)
        count = ctx.source.metric_count(old, mark)
        present = ctx.source.metric_count(old, 0) - count
        if present:
            ctx.report.count("metrics", "present", present)
        if count:
            pending.append((old, new, mark, count))
    total = sum(p[3] for p in pending)
    done = 0
    ctx.progress("metrics", 0, total)
    for old, new, mark, count in pending:
        if ctx.dry_run:
            ctx.report.count("metrics", "imported", count)
            continue
        for rows in ctx.source.metrics(old, mark, BATCH):
            write_rows(ctx.session, "metric_reports", _COLUMNS, [_values(new, r) for r in rows])
            ctx.ids.record("metrics", old, rows[-1]["id"])
            ctx.session.commit()
            ctx.report.count("metrics", "imported", len(rows))
            done += len(rows)
            ctx.progress("metrics", done, total)
    ctx.progress("metrics", total, total)
