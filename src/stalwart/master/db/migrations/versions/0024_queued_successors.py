"""allocations: the running allocation a queued successor waits behind

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06 12:30:00

A random or grid search's next trial may be placed on the slots of a running trial of its
experiment before that trial exits; the agent starts it the moment the running one exits.
``after_allocation_id`` names the allocation it waits behind (indexed: an ended allocation
looks up its successor to pass its slots on). Existing allocations have none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("after_allocation_id", sa.String(160), nullable=True))
        batch.create_index("ix_allocations_after_allocation_id", ["after_allocation_id"])


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.drop_index("ix_allocations_after_allocation_id")
        batch.drop_column("after_allocation_id")
