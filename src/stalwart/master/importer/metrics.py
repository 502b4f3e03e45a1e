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

What the master keeps beside the reports follows in the same transactions: each batch's live
validation reports are folded into their trials' summaries
(:func:`stalwart.master.services.metric_summaries.add_reports`, the only reports decoded), and
once every trial's metrics are in, each imported experiment's best trial and searcher metric
are recomputed from its trials' values
(:func:`stalwart.master.services.metrics.refresh_experiment_best`), so the experiment list sorts
and shows imported experiments like the others.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, String, Text, func, select

from stalwart.master.db.tables import Experiment, MetricReport, Trial, UtcDateTime, utcnow
from stalwart.master.importer.bulk import write_rows
from stalwart.master.importer.context import Context, aware
from stalwart.master.importer.replay import REPLAYED_KEY
from stalwart.master.importer.source import Row
from stalwart.master.services import metric_summaries, series_store
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.metrics import refresh_experiment_best

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
            metric_summaries.add_reports(ctx.session, _live_validations(new, rows))
            _advance_replayed_cursor(ctx, new)
            ctx.ids.record("metrics", old, rows[-1]["id"])
            ctx.session.commit()
            ctx.report.count("metrics", "imported", len(rows))
            done += len(rows)
            ctx.progress("metrics", done, total)
        series_store.forget(ctx.session, [new])  # built from its reports again, all of them
        ctx.session.commit()
    ctx.progress("metrics", total, total)
    if not ctx.dry_run:
        _refresh_best(ctx, [new for _, new in ctx.trials])


def _advance_replayed_cursor(ctx: Context, trial_id: int) -> None:
    """Move a replayed searcher's cursor past its experiment's validation reports imported so
    far (the replay fed them; the master must not feed them again). Only while the importer's
    flag is set: once the master has driven the searcher, its cursor is its own."""
    trial = ctx.session.get(Trial, trial_id)
    experiment = ctx.session.get(Experiment, trial.experiment_id) if trial else None
    state = experiment.searcher_state if experiment else None
    if experiment is None or not state or not state.get(REPLAYED_KEY):
        return
    ctx.session.flush()
    highest = ctx.session.scalar(
        select(func.max(MetricReport.id))
        .join(Trial, Trial.id == MetricReport.trial_id)
        .where(Trial.experiment_id == experiment.id, MetricReport.group == "validation")
    )
    if highest is not None and int(highest) > int(state.get("cursor", 0)):
        experiment.searcher_state = {**state, "cursor": int(highest)}


def _live_validations(trial_id: int, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The batch's live validation reports, decoded, as the summaries take them."""
    return [
        {
            "trial_id": trial_id,
            "group": metric_summaries.GROUP,
            "steps_completed": int(r["total_batches"] or 0),
            "metrics": json.loads(r["metrics_text"] or "{}"),
        }
        for r in rows
        if str(r["metric_group"]) == metric_summaries.GROUP and not r["archived"]
    ]


def _refresh_best(ctx: Context, trial_ids: Sequence[int]) -> None:
    """Recompute the best trial and searcher metric of the imported trials' experiments (500
    ids per query: SQLite bounds a statement's parameters)."""
    ids = sorted(set(trial_ids))
    experiment_ids: set[int] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        experiment_ids.update(
            ctx.session.scalars(select(Trial.experiment_id).where(Trial.id.in_(chunk)))
        )
    wanted = sorted(experiment_ids)
    smaller: dict[int, bool] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for experiment in ctx.session.scalars(select(Experiment).where(Experiment.id.in_(chunk))):
            smaller[experiment.id] = typed_config(experiment).searcher.smaller_is_better
    refresh_experiment_best(ctx.session, smaller)
    ctx.session.commit()
