"""access_tokens: users' long-lived access tokens (their SHA-256), with expiry and revocation

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 10:00:00

``det token create`` gives a user a token that works until it expires or is revoked, whatever
happens to the user's login sessions. Rows are never deleted: a revoked token keeps its row
(``revoked_at``) so that it is still listed with ``--show-inactive``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "access_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_access_tokens_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_access_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_access_tokens_token_sha256")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("access_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_access_tokens_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("access_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_access_tokens_user_id"))
    op.drop_table("access_tokens")
