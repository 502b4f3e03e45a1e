"""trials.warm_start_checkpoint and trial_source_infos: where a trial started from, and which
checkpoint or model version an inference or fine-tuning run used

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 13:40:00

A trial of an experiment with ``searcher.source_checkpoint_uuid`` / ``source_trial_id`` starts
from that checkpoint; the uuid is fixed when the trial is created (``warmStartCheckpointUuid``).
``POST /api/v1/trial-source-info`` links a trial to a checkpoint (and model version) it used;
one row per (trial, checkpoint), a repeated report replaces the row's type and model version.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.add_column(sa.Column("warm_start_checkpoint", sa.String(length=64), nullable=True))
    op.create_table(
        "trial_source_infos",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("checkpoint_uuid", sa.String(length=64), nullable=False),
        sa.Column("source_type", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=True),
        sa.Column("model_version", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["trial_id"],
            ["trials.id"],
            name=op.f("fk_trial_source_infos_trial_id_trials"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["checkpoint_uuid"],
            ["checkpoints.uuid"],
            name=op.f("fk_trial_source_infos_checkpoint_uuid_checkpoints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("trial_id", "checkpoint_uuid", name=op.f("pk_trial_source_infos")),
    )
    with op.batch_alter_table("trial_source_infos", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_trial_source_infos_checkpoint_uuid"), ["checkpoint_uuid"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("trial_source_infos", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_trial_source_infos_checkpoint_uuid"))
    op.drop_table("trial_source_infos")
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.drop_column("warm_start_checkpoint")
