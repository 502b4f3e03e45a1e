"""Models and their versions, templates and webhooks.

Names are unique on a Stalwart master: a model or template whose name is taken here is
skipped, with the reason. A model version whose checkpoint was not imported with its
experiment (another workspace, say) brings the checkpoint along on its own. Webhook triggers
Stalwart does not serve (``METRIC_THRESHOLD_EXCEEDED``) are skipped, the webhook kept.
"""

from __future__ import annotations

from sqlalchemy import select

from stalwart.master.db.tables import (
    Model,
    ModelVersion,
    Template,
    Webhook,
    WebhookTrigger,
    utcnow,
)
from stalwart.master.importer.context import Context, aware
from stalwart.master.importer.history import import_checkpoint
from stalwart.master.importer.source import Row
from stalwart.master.services.webhooks import TRIGGER_TYPES

__all__ = ["import_models", "import_templates", "import_webhooks"]


def import_models(ctx: Context) -> None:
    """The selected workspaces' models and their versions (a transaction per model)."""
    for row in ctx.source.models():
        if row["workspace_id"] not in ctx.workspaces:
            continue
        model_id = ctx.ids.get_int("model", row["id"])
        if model_id is None:
            if ctx.session.scalar(select(Model.id).where(Model.name == row["name"])):
                ctx.report.skip("model", row["id"], f"a model named {row['name']!r} exists here")
                continue
            model_id = _import_model(ctx, row)
        else:
            ctx.report.count("model", "present")
        for version in ctx.source.model_versions(row["id"]):
            _import_version(ctx, model_id, version)
        ctx.commit()


def _import_model(ctx: Context, row: Row) -> int:
    owner = ctx.user_id(row["user_id"])
    workspace = ctx.workspace_id(row["workspace_id"])
    assert owner is not None
    assert workspace is not None
    created = aware(row["creation_time"]) or utcnow()
    versions = ctx.source.model_versions(row["id"])
    return ctx.add(
        "model",
        Model(
            name=row["name"],
            description=row["description"] or "",
            notes=row["notes"] or "",
            metadata_=dict(row["metadata"] or {}),
            labels=list(row["labels"] or []),
            user_id=owner,
            workspace_id=workspace,
            archived=bool(row["archived"]),
            creation_time=created,
            last_updated_time=aware(row["last_updated_time"]) or created,
            last_version=max((int(v["version"]) for v in versions), default=0),
        ),
        row["id"],
    )


def _import_version(ctx: Context, model_id: int, row: Row) -> None:
    if ctx.ids.get("model_version", row["id"]) is not None:
        ctx.report.count("model_version", "present")
        return
    uuid_text = str(row["checkpoint_uuid"])
    if ctx.ids.get("checkpoint", uuid_text) is None:
        checkpoint = ctx.source.checkpoint(uuid_text)
        if checkpoint is None or not import_checkpoint(ctx, checkpoint):
            ctx.report.skip("model_version", row["id"], f"its checkpoint {uuid_text} is missing")
            return
    model = ctx.session.get(Model, model_id)
    assert model is not None
    created = aware(row["creation_time"]) or utcnow()
    ctx.add(
        "model_version",
        ModelVersion(
            model_id=model_id,
            version=int(row["version"]),
            checkpoint_uuid=uuid_text,
            name=row["name"] or "",
            comment=row["comment"] or "",
            notes=row["notes"] or "",
            metadata_=dict(row["metadata"] or {}),
            labels=list(row["labels"] or []),
            user_id=ctx.user_id(row["user_id"]) or model.user_id,
            creation_time=created,
            last_updated_time=aware(row["last_updated_time"]) or created,
        ),
        row["id"],
    )
    model.last_version = max(model.last_version, int(row["version"]))


def import_templates(ctx: Context) -> None:
    """The selected workspaces' templates (mapped by name)."""
    for row in ctx.source.templates():
        if row["workspace_id"] not in ctx.workspaces:
            continue
        if ctx.ids.get("template", row["name"]) is not None:
            ctx.report.count("template", "present")
            continue
        if ctx.session.get(Template, row["name"]) is not None:
            ctx.report.skip("template", row["name"], "a template with this name exists here")
            continue
        workspace = ctx.workspace_id(row["workspace_id"])
        assert workspace is not None
        ctx.session.add(Template(name=row["name"], config=row["config"], workspace_id=workspace))
        ctx.ids.record("template", row["name"], row["name"])
        ctx.report.count("template", "imported")
    ctx.commit()


def import_webhooks(ctx: Context) -> None:
    """The selected workspaces' webhooks (and global ones when no workspace is chosen)."""
    for row in ctx.source.webhooks():
        scope = row["workspace_id"]
        if scope is None and ctx.filtered:
            continue
        if scope is not None and scope not in ctx.workspaces:
            continue
        if ctx.ids.get("webhook", row["id"]) is not None:
            ctx.report.count("webhook", "present")
            continue
        new_id = ctx.add(
            "webhook",
            Webhook(
                name=row["name"],
                url=row["url"],
                webhook_type=str(row["webhook_type"]),
                mode=str(row["mode"]),
                workspace_id=ctx.workspace_id(scope),
            ),
            row["id"],
        )
        for trigger in ctx.source.webhook_triggers(row["id"]):
            kind = str(trigger["trigger_type"])
            if kind not in TRIGGER_TYPES:
                ctx.report.skip("webhook_trigger", trigger["id"], f"Stalwart has no {kind} trigger")
                continue
            ctx.session.add(
                WebhookTrigger(
                    webhook_id=new_id, trigger_type=kind, condition=dict(trigger["condition"])
                )
            )
    ctx.commit()
