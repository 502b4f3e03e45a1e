"""trials.summary_metrics, metric_series and metric_rollups: what charts and trial lists read

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04 20:00:00

A trial's ``summaryMetrics`` and the charts of long trials were computed from every stored
report's JSON on each cold read (seconds for 100 trials x 10,000 reports). The ingest now keeps
them (:mod:`stalwart.master.services.series_store`):

- ``trials.summary_metrics``: Determined's summary object; NULL means "not built yet". Existing
  trials are left NULL here: the first read or report of such a trial builds its stored data from
  its reports (so this migration stays quick on a large database).
- ``metric_series``: per (trial, group, top-level metric) the number of finite values stored and
  the newest report id among them.
- ``metric_rollups``: per series, level L >= 1 and bucket b, the values whose arrival ordinal
  divided by 8**L is b: count, sum, and the first, smallest, largest and last value, each with
  its steps and report id.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def _point(name: str) -> list[sa.Column[object]]:
    return [
        sa.Column(f"{name}_value", sa.Float(), nullable=False),
        sa.Column(f"{name}_steps", sa.BigInteger(), nullable=False),
        sa.Column(f"{name}_report", sa.BigInteger(), nullable=False),
    ]


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("summary_metrics", sa.JSON(), nullable=True))
    op.create_table(
        "metric_series",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("points", sa.BigInteger(), nullable=False),
        sa.Column("newest_report", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trial_id"],
            ["trials.id"],
            name=op.f("fk_metric_series_trial_id_trials"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("trial_id", "group", "name", name=op.f("pk_metric_series")),
    )
    op.create_table(
        "metric_rollups",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("bucket", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("sum", sa.Float(), nullable=False),
        *_point("first"),
        *_point("min"),
        *_point("max"),
        *_point("last"),
        sa.ForeignKeyConstraint(
            ["trial_id"],
            ["trials.id"],
            name=op.f("fk_metric_rollups_trial_id_trials"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "trial_id", "group", "name", "level", "bucket", name=op.f("pk_metric_rollups")
        ),
    )


def downgrade() -> None:
    op.drop_table("metric_rollups")
    op.drop_table("metric_series")
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("summary_metrics")
