"""agent_credentials: each agent's own token (its SHA-256), issued at enrollment

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 00:30:00

Until this revision every agent synced with the one cluster token. From now on that token only
enrolls an agent id that has no credential yet: the master answers a token of the agent's own
(:mod:`stalwart.master.services.agent_credentials`) and keeps its hash here. Agents of an
upgraded cluster have no row: each enrolls at its next sync, with the token it already has.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_credentials",
        sa.Column("agent_id", sa.String(length=255), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_agent_credentials")),
    )


def downgrade() -> None:
    op.drop_table("agent_credentials")
