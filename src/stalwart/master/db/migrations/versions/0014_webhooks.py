"""webhooks: webhooks, their triggers, the delivery outbox and fired task-log triggers

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04 10:15:00

Webhooks post JSON (or Slack messages) when an experiment changes state or a task logs a line
matching a regex. Events are written to ``webhook_deliveries`` in the transaction that caused
them and posted by the master's deliverer, with retries.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_AUTOINCREMENT = {"sqlite_autoincrement": True}
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("webhook_type", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_webhooks_workspace_id_workspaces"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["users.id"],
            name=op.f("fk_webhooks_created_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
        **_AUTOINCREMENT,
    )
    op.create_index(op.f("ix_webhooks_workspace_id"), "webhooks", ["workspace_id"])
    op.create_table(
        "webhook_triggers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("webhook_id", sa.Integer(), nullable=False),
        sa.Column("trigger_type", sa.String(length=32), nullable=False),
        sa.Column("condition", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["webhook_id"],
            ["webhooks.id"],
            name=op.f("fk_webhook_triggers_webhook_id_webhooks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_triggers")),
        **_AUTOINCREMENT,
    )
    op.create_index(op.f("ix_webhook_triggers_webhook_id"), "webhook_triggers", ["webhook_id"])
    op.create_index(op.f("ix_webhook_triggers_trigger_type"), "webhook_triggers", ["trigger_type"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("webhook_id", sa.Integer(), nullable=False),
        sa.Column("event_type", sa.String(length=32), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        **_AUTOINCREMENT,
    )
    op.create_index("ix_webhook_deliveries_due", "webhook_deliveries", ["state", "next_attempt_at"])
    op.create_index(op.f("ix_webhook_deliveries_webhook_id"), "webhook_deliveries", ["webhook_id"])
    op.create_index(
        op.f("ix_webhook_deliveries_finished_at"), "webhook_deliveries", ["finished_at"]
    )
    op.create_table(
        "webhook_log_matches",
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("trigger_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("task_id", "trigger_id", name=op.f("pk_webhook_log_matches")),
    )


def downgrade() -> None:
    op.drop_table("webhook_log_matches")
    op.drop_index(op.f("ix_webhook_deliveries_finished_at"), table_name="webhook_deliveries")
    op.drop_index(op.f("ix_webhook_deliveries_webhook_id"), table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_due", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index(op.f("ix_webhook_triggers_trigger_type"), table_name="webhook_triggers")
    op.drop_index(op.f("ix_webhook_triggers_webhook_id"), table_name="webhook_triggers")
    op.drop_table("webhook_triggers")
    op.drop_index(op.f("ix_webhooks_workspace_id"), table_name="webhooks")
    op.drop_table("webhooks")
