"""ids are never reused (SQLite AUTOINCREMENT), and failed logins are kept in the database

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-10 09:00:00

SQLite hands out the highest freed rowid again when a table has no ``AUTOINCREMENT``: delete
experiment 78, create one, and it is 78 again. On SQLite this revision rebuilds every table
with an integer id as ``AUTOINCREMENT`` (batch mode, ``recreate="always"``: the rows are copied
as they are) and starts each table's ``sqlite_sequence`` past the highest id still in the table
or still named by another row (a fork's ``parent_id``, a checkpoint's ``experiment_id``...).
The ids of rows deleted before this revision, above every id left, cannot be known and may be
handed out once more. PostgreSQL's sequences never go back: nothing to do there.

The rebuild needs foreign keys off (a ``DROP TABLE`` would otherwise cascade into the
referencing tables); ``migrations/env.py`` turns them off around every migration on SQLite.

``login_failures`` holds failed logins (:mod:`stalwart.master.services.login_limits`), so the
lockout holds across master restarts and between masters sharing the database.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

REBUILT = {
    # table: other (table, column) pairs that may name one of its ids without a foreign key
    "users": (),
    "user_sessions": (),
    "workspaces": (("projects", "workspace_id"),),
    "workspace_roles": (),
    "projects": (("experiments", "project_id"),),
    "experiments": (
        ("experiments", "parent_id"),
        ("checkpoints", "experiment_id"),
        ("tasks", "experiment_id"),
    ),
    "trials": (("tasks", "trial_id"), ("checkpoints", "trial_id")),
    "metric_reports": (),
    "storage_backends": (("checkpoints", "storage_id"),),
    "task_logs": (),
}
"""The tables with an integer id, which become ``AUTOINCREMENT`` on SQLite."""


def _rebuild(table: str, *, autoincrement: bool) -> None:
    with op.batch_alter_table(
        table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
    ):
        pass


def _start_sequence_past_used_ids(table: str, others: tuple[tuple[str, str], ...]) -> None:
    """Make ``table``'s next id higher than any id it holds or another table names."""
    bind = op.get_bind()
    top = 0
    for source, column in ((table, "id"), *others):
        used = bind.execute(sa.text(f"select max({column}) from {source}")).scalar()
        top = max(top, int(used or 0))
    seq = bind.execute(
        sa.text("select seq from sqlite_sequence where name = :t"), {"t": table}
    ).scalar()
    if seq is None:
        if top:
            bind.execute(
                sa.text("insert into sqlite_sequence (name, seq) values (:t, :s)"),
                {"t": table, "s": top},
            )
    elif seq < top:
        bind.execute(
            sa.text("update sqlite_sequence set seq = :s where name = :t"), {"t": table, "s": top}
        )


def upgrade() -> None:
    op.create_table(
        "login_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=255), nullable=False),
        sa.Column("address", sa.String(length=255), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_failures")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("login_failures", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_login_failures_failed_at"), ["failed_at"], unique=False
        )
        batch_op.create_index(
            "ix_login_failures_key", ["username", "address", "failed_at"], unique=False
        )
    if op.get_bind().dialect.name != "sqlite":
        return
    for table, others in REBUILT.items():
        _rebuild(table, autoincrement=True)
        _start_sequence_past_used_ids(table, others)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for table in REBUILT:
            _rebuild(table, autoincrement=False)
    with op.batch_alter_table("login_failures", schema=None) as batch_op:
        batch_op.drop_index("ix_login_failures_key")
        batch_op.drop_index(batch_op.f("ix_login_failures_failed_at"))
    op.drop_table("login_failures")
