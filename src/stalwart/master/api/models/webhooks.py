"""Wire models of webhooks: ``v1Webhook``, ``v1Trigger`` and their requests and responses."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import WireModel, WireRequest

__all__ = [
    "CustomWebhookEventData",
    "GetWebhooksResponse",
    "PatchWebhookRequest",
    "PostWebhookEventDataRequest",
    "PostWebhookResponse",
    "TestWebhookResponse",
    "V1Trigger",
    "V1Webhook",
    "WebhookDeliveriesResponse",
    "WebhookDelivery",
    "WebhookRequest",
]


class V1Trigger(WireModel):
    """``v1Trigger``: what fires a webhook."""

    id: int | None = Field(default=None, description="The trigger id.")
    trigger_type: str | None = Field(
        default=None,
        description="TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE or TRIGGER_TYPE_TASK_LOG.",
    )
    condition: dict[str, Any] | None = Field(
        default=None, description='{"state": "COMPLETED"} or {"regex": "..."}.'
    )
    webhook_id: int | None = Field(default=None, description="Its webhook.")


class V1Webhook(WireModel):
    """``v1Webhook``: REQUIRED mode, name, url, webhookType."""

    id: int | None = Field(default=None, description="The webhook id.")
    name: str = Field(description="Its name (experiments name SPECIFIC webhooks by it).")
    url: str = Field(description="Where events are posted.")
    webhook_type: str = Field(description="WEBHOOK_TYPE_DEFAULT or WEBHOOK_TYPE_SLACK.")
    mode: str = Field(description="WEBHOOK_MODE_WORKSPACE or WEBHOOK_MODE_SPECIFIC.")
    workspace_id: int | None = Field(default=None, description="Its workspace; 0: global.")
    triggers: list[V1Trigger] = Field(default_factory=list, description="What fires it.")


class WebhookRequest(WireRequest):
    """The body of ``POST /api/v1/webhooks`` (a ``v1Webhook`` without ids)."""

    name: str = Field(default="", description="Its name.")
    url: str = Field(description="Where events are posted.")
    webhook_type: str = Field(
        default="WEBHOOK_TYPE_DEFAULT", description="WEBHOOK_TYPE_DEFAULT or WEBHOOK_TYPE_SLACK."
    )
    mode: str | None = Field(
        default=None, description="WEBHOOK_MODE_WORKSPACE (default) or _SPECIFIC."
    )
    workspace_id: int | None = Field(default=None, description="Its workspace; 0 or null: global.")
    triggers: list[V1Trigger] | None = Field(default=None, description="What fires it.")


class GetWebhooksResponse(WireModel):
    """``v1GetWebhooksResponse``."""

    webhooks: list[V1Webhook] = Field(default_factory=list, description="The webhooks.")


class PostWebhookResponse(WireModel):
    """``v1PostWebhookResponse``."""

    webhook: V1Webhook = Field(description="The created webhook.")


class PatchWebhookRequest(WireRequest):
    """``v1PatchWebhook``."""

    url: str = Field(description="The new URL.")


class TestWebhookResponse(WireModel):
    """``v1TestWebhookResponse``."""

    completed: bool = Field(description="The receiver took the test event (2xx).")


class WebhookDelivery(WireModel):
    """One event of a webhook and how its delivery went (a Stalwart extension)."""

    id: int = Field(description="The delivery id.")
    webhook_id: int = Field(description="Its webhook.")
    event_type: str = Field(description="EXPERIMENT_STATE_CHANGE or TASK_LOG.")
    state: str = Field(description="PENDING, DELIVERED or FAILED.")
    attempts: int = Field(description="Attempts made.")
    created_at: str | None = Field(description="When the event happened.")
    next_attempt_at: str | None = Field(description="When a PENDING one is tried next.")
    finished_at: str | None = Field(description="When it was delivered or given up.")
    last_error: str | None = Field(description="Why the last attempt failed.")
    payload: str = Field(description="The JSON body posted.")


class WebhookDeliveriesResponse(WireModel):
    """``GET /api/v1/webhooks/{id}/deliveries``."""

    deliveries: list[WebhookDelivery] = Field(default_factory=list, description="Newest first.")


class CustomWebhookEventData(WireRequest):
    """``v1CustomWebhookEventData``."""

    title: str | None = Field(default=None, description="The alert's title.")
    description: str | None = Field(default=None, description="The alert's text.")
    level: str | None = Field(default=None, description="LOG_LEVEL_INFO, _WARNING...")


class PostWebhookEventDataRequest(WireRequest):
    """``v1PostWebhookEventDataRequest``: a trial's ``core_context.alert()``."""

    data: CustomWebhookEventData | None = Field(default=None, description="The alert.")
    experiment_id: int = Field(description="The experiment it is about.")
    trial_id: int | None = Field(default=None, description="The trial that sent it.")
