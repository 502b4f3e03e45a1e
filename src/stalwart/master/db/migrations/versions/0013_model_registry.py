"""The model registry: models and their versions (registered checkpoints)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 10:00:00

A model is a named series of versions in a workspace; each version names one checkpoint, which
checkpoint GC then keeps.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("creation_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_updated_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_models_user_id_users")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_models_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
        sa.UniqueConstraint("name", name=op.f("uq_models_name")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_models_user_id"), ["user_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_models_workspace_id"), ["workspace_id"], unique=False)
    op.create_table(
        "model_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("checkpoint_uuid", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("creation_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_updated_time", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["checkpoint_uuid"],
            ["checkpoints.uuid"],
            name=op.f("fk_model_versions_checkpoint_uuid_checkpoints"),
        ),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_model_versions_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_model_versions_user_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_versions")),
        sa.UniqueConstraint("model_id", "version", name=op.f("uq_model_versions_model_id")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_model_versions_checkpoint_uuid"), ["checkpoint_uuid"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_model_versions_model_id"), ["model_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_model_versions_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_model_versions_user_id"))
        batch_op.drop_index(batch_op.f("ix_model_versions_model_id"))
        batch_op.drop_index(batch_op.f("ix_model_versions_checkpoint_uuid"))
    op.drop_table("model_versions")
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_models_workspace_id"))
        batch_op.drop_index(batch_op.f("ix_models_user_id"))
    op.drop_table("models")
