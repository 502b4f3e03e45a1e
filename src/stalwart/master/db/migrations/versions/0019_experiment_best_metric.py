"""experiments: best trial and best searcher metric, stored

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 16:25:00

The experiment list sorts and shows each experiment's best searcher metric value; computing it
from the trials on every page costs a scan per experiment. ``best_trial_id`` and
``best_searcher_metric`` are kept where validations are ingested; this backfills them from the
trials' stored ``searcher_metric_value`` (per the experiment's ``searcher.smaller_is_better``,
ties to the lowest trial id).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def _smaller_is_better(config: Any) -> bool:
    searcher = config.get("searcher") if isinstance(config, dict) else None
    if isinstance(searcher, dict) and isinstance(searcher.get("smaller_is_better"), bool):
        return bool(searcher["smaller_is_better"])
    return True


def upgrade() -> None:
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


def downgrade() -> None:
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("best_searcher_metric")
        batch.drop_column("best_trial_id")
