"""User groups, workspace roles given to groups, and resource pools bound to workspaces

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 10:00:00

``user_groups`` and ``user_group_members`` hold groups of users (``det user-group``);
``workspace_group_roles`` gives a group a role in a workspace (each member has at least that role
there); ``pool_bindings`` binds a resource pool to workspaces (a bound pool serves only their
experiments and tasks).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_groups")),
        sa.UniqueConstraint("name", name=op.f("uq_user_groups_name")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "user_group_members",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["user_groups.id"],
            name=op.f("fk_user_group_members_group_id_user_groups"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_user_group_members_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("group_id", "user_id", name=op.f("pk_user_group_members")),
    )
    with op.batch_alter_table("user_group_members", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_user_group_members_user_id"), ["user_id"], unique=False
        )
    op.create_table(
        "workspace_group_roles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["user_groups.id"],
            name=op.f("fk_workspace_group_roles_group_id_user_groups"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_workspace_group_roles_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspace_group_roles")),
        sa.UniqueConstraint(
            "workspace_id", "group_id", name=op.f("uq_workspace_group_roles_workspace_id")
        ),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("workspace_group_roles", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_workspace_group_roles_group_id"), ["group_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_workspace_group_roles_workspace_id"), ["workspace_id"], unique=False
        )
    op.create_table(
        "pool_bindings",
        sa.Column("pool_name", sa.String(length=255), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_pool_bindings_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pool_name", "workspace_id", name=op.f("pk_pool_bindings")),
    )
    with op.batch_alter_table("pool_bindings", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_pool_bindings_workspace_id"), ["workspace_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("pool_bindings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pool_bindings_workspace_id"))
    op.drop_table("pool_bindings")
    with op.batch_alter_table("workspace_group_roles", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workspace_group_roles_workspace_id"))
        batch_op.drop_index(batch_op.f("ix_workspace_group_roles_group_id"))
    op.drop_table("workspace_group_roles")
    with op.batch_alter_table("user_group_members", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_user_group_members_user_id"))
    op.drop_table("user_group_members")
    op.drop_table("user_groups")
