"""user_web_settings: the web UI's per-user settings

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 13:45:03

``GET|POST /api/v1/users/setting`` and ``POST /api/v1/users/setting/reset`` (Determined's web
UI keeps its table columns, filters and pins there): opaque text per user, storage path and
key. A user's settings go with the user.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_web_settings",
        sa.Column("user_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("storage_path", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_user_web_settings_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "user_id", "storage_path", "key", name=op.f("pk_user_web_settings")
        ),
    )


def downgrade() -> None:
    op.drop_table("user_web_settings")
