"""agents: the digest of the report each agent registered with

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05 17:40:00

An agent syncs several times a second under load, repeating the report it registered with; a
repeat only heartbeats. Each master process used to remember the last report per agent in
memory, so with several workers one could skip a registration that another had changed since
(slots gone and back). The digest now lives on the agent's row, the same for every worker and
across restarts. Existing agents start with none and register in full at their next sync.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("registered_report", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("registered_report")
