"""Workspaces and projects: agent identity, checkpoint storage, default pools, pins; project
keys, notes and creation time

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 10:00:00

A workspace says which OS user its tasks run as, where its experiments' checkpoints go and
which pools its experiments and tasks use when they name none; each user may pin workspaces.
Projects get a short unique key (existing ones get ``P`` and their id in base 36), notes and
their creation time.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def backfill_key(project_id: int) -> str:
    """The key given to a project that had none: ``P`` and its id in base 36 (4 digits)."""
    digits = ""
    value = project_id
    while value:
        value, rest = divmod(value, 36)
        digits = _DIGITS[rest] + digits
    return "P" + digits.rjust(4, "0")[-4:]


def upgrade() -> None:
    with op.batch_alter_table("workspaces", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_uid", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("agent_gid", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("agent_user", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("agent_group", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("checkpoint_storage", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("default_compute_pool", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("default_aux_pool", sa.String(length=255), nullable=True))
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key", sa.String(length=5), nullable=True))
        batch_op.add_column(
            sa.Column("notes", sa.JSON(), nullable=False, server_default=sa.text("'[]'"))
        )
        batch_op.add_column(sa.Column("created_at", sa.DateTime(timezone=True), nullable=True))
    projects = sa.table("projects", sa.column("id", sa.Integer()), sa.column("key", sa.String()))
    bind = op.get_bind()
    for (project_id,) in bind.execute(sa.select(projects.c.id)).all():
        bind.execute(
            projects.update()
            .where(projects.c.id == project_id)
            .values(key=backfill_key(int(project_id)))
        )
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.create_unique_constraint(batch_op.f("uq_projects_key"), ["key"])
    op.create_table(
        "workspace_pins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_workspace_pins_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_workspace_pins_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspace_pins")),
        sa.UniqueConstraint("workspace_id", "user_id", name=op.f("uq_workspace_pins_workspace_id")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("workspace_pins", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_workspace_pins_user_id"), ["user_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_workspace_pins_workspace_id"), ["workspace_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("workspace_pins", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workspace_pins_workspace_id"))
        batch_op.drop_index(batch_op.f("ix_workspace_pins_user_id"))
    op.drop_table("workspace_pins")
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_projects_key"), type_="unique")
        batch_op.drop_column("created_at")
        batch_op.drop_column("notes")
        batch_op.drop_column("key")
    with op.batch_alter_table("workspaces", schema=None) as batch_op:
        batch_op.drop_column("default_aux_pool")
        batch_op.drop_column("default_compute_pool")
        batch_op.drop_column("checkpoint_storage")
        batch_op.drop_column("agent_group")
        batch_op.drop_column("agent_user")
        batch_op.drop_column("agent_gid")
        batch_op.drop_column("agent_uid")
