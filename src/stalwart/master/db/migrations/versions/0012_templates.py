"""Config templates: named partial configs that belong to a workspace

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 10:00:00

``det template set/list/describe/remove`` store templates here; ``--template NAME`` on
experiments and interactive tasks merges a template's config under the user's.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "templates",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_templates_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_templates")),
    )
    with op.batch_alter_table("templates", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_templates_workspace_id"), ["workspace_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("templates", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_templates_workspace_id"))
    op.drop_table("templates")
