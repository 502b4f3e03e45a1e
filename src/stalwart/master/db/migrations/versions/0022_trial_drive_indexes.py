"""trials: indexes for what every exit and validation reads of an experiment of any size

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05 14:50:00

Each drive of an experiment's searcher reads the progress of its live trials and the trials
whose exit it has not been fed, and each validation report looks up the experiment's best
trial. Through ``ix_trials_experiment_id`` each of these read every trial the experiment ever
had: 4-5 ms apiece once a search has made 10,000 trials (B1, issue 25), on every exit or
report. ``ix_trials_experiment_state`` finds the live ones (``state IN (...)``), the partial
index ``ix_trials_searcher_exit`` (only trials with an exit still to feed) the others, and
``ix_trials_experiment_metric`` the best value at one end of the experiment's range.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_PENDING_EXIT = sa.text("searcher_exit IS NOT NULL")


def upgrade() -> None:
    op.create_index("ix_trials_experiment_state", "trials", ["experiment_id", "state"])
    op.create_index(
        "ix_trials_experiment_metric", "trials", ["experiment_id", "searcher_metric_value"]
    )
    op.create_index(
        "ix_trials_searcher_exit",
        "trials",
        ["experiment_id"],
        sqlite_where=_PENDING_EXIT,
        postgresql_where=_PENDING_EXIT,
    )


def downgrade() -> None:
    op.drop_index("ix_trials_searcher_exit", table_name="trials")
    op.drop_index("ix_trials_experiment_metric", table_name="trials")
    op.drop_index("ix_trials_experiment_state", table_name="trials")
