"""containers, searcher stops and checkpoint collection

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 20:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "containers",
        sa.Column("allocation_id", sa.String(length=160), nullable=False),
        sa.Column("rank", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("agent_id", sa.String(length=255), nullable=False),
        sa.Column("slot_ids", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("exit_reason", sa.Text(), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("assigned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("exited_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["allocation_id"],
            ["allocations.id"],
            name=op.f("fk_containers_allocation_id_allocations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("allocation_id", "rank", name=op.f("pk_containers")),
    )
    with op.batch_alter_table("containers", schema=None) as batch_op:
        batch_op.create_index("ix_containers_agent_state", ["agent_id", "state"], unique=False)
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("searcher_stopped", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "checkpoints_collected", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_column("checkpoints_collected")
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.drop_column("searcher_stopped")
    with op.batch_alter_table("containers", schema=None) as batch_op:
        batch_op.drop_index("ix_containers_agent_state")
    op.drop_table("containers")
