"""workspace roles: workspaces.default_role and the workspace_roles table

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 04:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workspaces", schema=None) as batch_op:
        batch_op.add_column(sa.Column("default_role", sa.String(length=16), nullable=True))
    op.create_table(
        "workspace_roles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_workspace_roles_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_workspace_roles_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspace_roles")),
        sa.UniqueConstraint(
            "workspace_id", "user_id", name=op.f("uq_workspace_roles_workspace_id")
        ),
    )
    with op.batch_alter_table("workspace_roles", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_workspace_roles_user_id"), ["user_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_workspace_roles_workspace_id"), ["workspace_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("workspace_roles", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workspace_roles_workspace_id"))
        batch_op.drop_index(batch_op.f("ix_workspace_roles_user_id"))
    op.drop_table("workspace_roles")
    with op.batch_alter_table("workspaces", schema=None) as batch_op:
        batch_op.drop_column("default_role")
