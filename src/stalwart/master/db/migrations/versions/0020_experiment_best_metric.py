"""experiments: best trial and best searcher metric; trial_metric_summaries

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04 16:25:00

The experiment list sorts and shows each experiment's best searcher metric value; computing it
from the trials on every page costs a scan per experiment. ``best_trial_id`` and
``best_searcher_metric`` are kept where validations are ingested; this backfills them from the
trials' stored ``searcher_metric_value`` (per the experiment's ``searcher.smaller_is_better``,
ties to the lowest trial id).

``trial_metric_summaries`` keeps each trial's numeric validation metrics summarized (min, max,
sum, count, latest) so that sorting by one reads an indexed row, not every report's JSON; it
is filled here from the live validation reports, in step order (finite numbers only).
"""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def _smaller_is_better(config: Any) -> bool:
    searcher = config.get("searcher") if isinstance(config, dict) else None
    if isinstance(searcher, dict) and isinstance(searcher.get("smaller_is_better"), bool):
        return bool(searcher["smaller_is_better"])
    return True


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _backfill_summaries(bind: Any, summaries: sa.Table) -> None:
    reports = sa.table(
        "metric_reports",
        sa.column("id", sa.BigInteger()),
        sa.column("trial_id", sa.Integer()),
        sa.column("group", sa.String()),
        sa.column("steps_completed", sa.BigInteger()),
        sa.column("metrics", sa.JSON()),
        sa.column("archived", sa.Boolean()),
    )
    rows = bind.execute(
        sa.select(reports.c.trial_id, reports.c.steps_completed, reports.c.metrics)
        .where(reports.c.group == "validation", reports.c.archived.is_(False))
        .order_by(reports.c.trial_id, reports.c.steps_completed, reports.c.id)
    )
    found: dict[tuple[int, str], dict[str, Any]] = {}
    for trial_id, steps, metrics in rows:
        for name, raw in (metrics or {}).items():
            value = _finite(raw)
            if value is None:
                continue
            entry = found.get((trial_id, name))
            if entry is None:
                found[(trial_id, name)] = {
                    "trial_id": trial_id,
                    "group": "validation",
                    "name": name,
                    "min": value,
                    "max": value,
                    "sum": value,
                    "count": 1,
                    "last": value,
                    "last_steps": steps,
                }
                continue
            entry["min"] = min(entry["min"], value)
            entry["max"] = max(entry["max"], value)
            entry["sum"] += value
            entry["count"] += 1
            entry["last"], entry["last_steps"] = value, steps
    values = list(found.values())
    for chunk in range(0, len(values), 1000):
        bind.execute(summaries.insert(), values[chunk : chunk + 1000])


def upgrade() -> None:
    summaries = op.create_table(
        "trial_metric_summaries",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("min", sa.Float(), nullable=False),
        sa.Column("max", sa.Float(), nullable=False),
        sa.Column("sum", sa.Float(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("last", sa.Float(), nullable=False),
        sa.Column("last_steps", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trial_id"],
            ["trials.id"],
            name=op.f("fk_trial_metric_summaries_trial_id_trials"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "trial_id", "group", "name", name=op.f("pk_trial_metric_summaries")
        ),
    )
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("best_trial_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("best_searcher_metric", sa.Float(), nullable=True))
    experiments = sa.table(
        "experiments",
        sa.column("id", sa.Integer()),
        sa.column("config", sa.JSON()),
        sa.column("best_trial_id", sa.Integer()),
        sa.column("best_searcher_metric", sa.Float()),
    )
    trials = sa.table(
        "trials",
        sa.column("id", sa.Integer()),
        sa.column("experiment_id", sa.Integer()),
        sa.column("searcher_metric_value", sa.Float()),
    )
    bind = op.get_bind()
    smaller = {
        int(exp_id): _smaller_is_better(config)
        for exp_id, config in bind.execute(sa.select(experiments.c.id, experiments.c.config))
    }
    best: dict[int, tuple[int, float]] = {}
    rows = bind.execute(
        sa.select(trials.c.experiment_id, trials.c.id, trials.c.searcher_metric_value)
        .where(trials.c.searcher_metric_value.is_not(None))
        .order_by(trials.c.id)
    )
    for exp_id, trial_id, value in rows:
        current = best.get(exp_id)
        less = smaller.get(exp_id, True)
        if current is None or (value < current[1] if less else value > current[1]):
            best[exp_id] = (int(trial_id), float(value))
    update = (
        experiments.update()
        .where(experiments.c.id == sa.bindparam("exp_id"))
        .values(best_trial_id=sa.bindparam("trial"), best_searcher_metric=sa.bindparam("value"))
    )
    found = [{"exp_id": e, "trial": t, "value": v} for e, (t, v) in sorted(best.items())]
    for chunk in range(0, len(found), 1000):
        bind.execute(update, found[chunk : chunk + 1000])
    _backfill_summaries(bind, summaries)


def downgrade() -> None:
    op.drop_table("trial_metric_summaries")
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("best_searcher_metric")
        batch.drop_column("best_trial_id")
