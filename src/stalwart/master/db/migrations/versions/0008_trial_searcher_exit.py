"""trials.searcher_exit: a trial's exit waiting to be fed to its searcher

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 01:00:00

A trial's end and the searcher's reaction to it were two transactions; a master killed between
them left the searcher waiting for a trial that had ended, and its experiment never finished.
The end now records the exit on the trial, and the searcher takes it from there.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.add_column(sa.Column("searcher_exit", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.drop_column("searcher_exit")
