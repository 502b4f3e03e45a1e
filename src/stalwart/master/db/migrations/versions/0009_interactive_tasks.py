"""Interactive tasks: their workspace, config, files and secrets; allocation readiness and idleness

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 04:00:00

Commands, notebooks, shells, TensorBoards and generic tasks are tasks without a trial. They keep
their own config, uploaded files and secrets (a notebook's token, a shell's key pair), and their
allocations record when the service answers and when a user last used it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("workspace_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("config", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("context", sa.LargeBinary(), nullable=True))
        batch_op.add_column(sa.Column("secrets", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("extra", sa.JSON(), nullable=True))
        batch_op.create_index(batch_op.f("ix_tasks_workspace_id"), ["workspace_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_tasks_workspace_id_workspaces"),
            "workspaces",
            ["workspace_id"],
            ["id"],
            ondelete="SET NULL",
        )
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("is_ready", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("last_activity", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("idle", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.drop_column("idle")
        batch_op.drop_column("last_activity")
        batch_op.drop_column("is_ready")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_tasks_workspace_id_workspaces"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_tasks_workspace_id"))
        batch_op.drop_column("extra")
        batch_op.drop_column("secrets")
        batch_op.drop_column("context")
        batch_op.drop_column("config")
        batch_op.drop_column("workspace_id")
