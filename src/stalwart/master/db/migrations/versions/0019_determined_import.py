"""determined import: the import mapping, and experiments' notes

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 16:09:03

``stalwart import determined`` records what it imported in ``import_mappings`` (one row per
thing, or a metrics watermark per trial), so a second or interrupted run imports only what is
missing. Experiments get ``notes`` (Determined's, served as ``v1Experiment.notes``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "import_mappings",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("old_id", sa.String(length=255), nullable=False),
        sa.Column("new_id", sa.String(length=255), nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source", "kind", "old_id", name=op.f("pk_import_mappings")),
    )
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("notes", sa.Text(), server_default="", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_column("notes")
    op.drop_table("import_mappings")
