"""experiments.unmanaged and experiments.external_experiment_id: the SDK's detached mode

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04 13:40:00

The official SDK's ``core_v2`` reports experiments run outside the cluster (unmanaged): the
master creates no trial and runs nothing for them, and an external id finds one again so a
script run twice resumes the same experiment. Columns added in place (no table rebuild).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ALTER TABLE ADD COLUMN and CREATE INDEX: batch mode would rebuild the SQLite table
    # and lose its AUTOINCREMENT (ids must never be reused)
    op.add_column(
        "experiments",
        sa.Column("unmanaged", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.add_column(
        "experiments", sa.Column("external_experiment_id", sa.String(length=255), nullable=True)
    )
    op.create_index(
        op.f("ix_experiments_external_experiment_id"),
        "experiments",
        ["external_experiment_id"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_experiments_external_experiment_id"), table_name="experiments")
    with op.batch_alter_table("experiments", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("external_experiment_id")
        batch_op.drop_column("unmanaged")
