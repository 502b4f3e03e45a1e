"""Webhooks as the SDK sees them (``Client.create_webhook`` and friends; docs/webhooks.md).

A :class:`Webhook` is a plain snapshot: its id, name, URL, type (``DEFAULT`` or ``SLACK``),
mode (``WORKSPACE`` or ``SPECIFIC``), workspace (None: global) and :class:`WebhookTrigger`\\ s
(``EXPERIMENT_STATE_CHANGE`` with a state, or ``TASK_LOG`` with a regex), without the wire's
enum prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stalwart.client.session import Session
from stalwart.master.api.models.webhooks import (
    GetWebhooksResponse,
    PostWebhookResponse,
    V1Webhook,
    WebhookDeliveriesResponse,
    WebhookDelivery,
)

__all__ = [
    "Webhook",
    "WebhookDelivery",
    "WebhookTrigger",
    "create_webhook",
    "delete_webhook",
    "list_deliveries",
    "list_webhooks",
    "test_webhook",
]


@dataclass(frozen=True)
class WebhookTrigger:
    """What fires a webhook: ``EXPERIMENT_STATE_CHANGE`` (``state``) or ``TASK_LOG``
    (``regex``)."""

    trigger_type: str
    state: str | None = None
    regex: str | None = None

    @property
    def condition(self) -> str:
        """``state=COMPLETED`` or ``regex=...``, for people."""
        return f"state={self.state}" if self.state is not None else f"regex={self.regex}"


@dataclass(frozen=True)
class Webhook:
    """A webhook (see the module docstring)."""

    id: int
    name: str
    url: str
    webhook_type: str
    mode: str
    workspace_id: int | None
    triggers: tuple[WebhookTrigger, ...]

    @classmethod
    def of(cls, wire: V1Webhook) -> Webhook:
        triggers = tuple(
            WebhookTrigger(
                (t.trigger_type or "").removeprefix("TRIGGER_TYPE_"),
                state=(t.condition or {}).get("state"),
                regex=(t.condition or {}).get("regex"),
            )
            for t in wire.triggers
        )
        return cls(
            id=wire.id or 0,
            name=wire.name,
            url=wire.url,
            webhook_type=wire.webhook_type.removeprefix("WEBHOOK_TYPE_"),
            mode=wire.mode.removeprefix("WEBHOOK_MODE_"),
            workspace_id=wire.workspace_id or None,
            triggers=triggers,
        )


def list_webhooks(session: Session) -> list[Webhook]:
    """The webhooks the user may manage."""
    return [Webhook.of(w) for w in session.get("/api/v1/webhooks", GetWebhooksResponse).webhooks]


def create_webhook(
    session: Session,
    url: str,
    *,
    name: str = "",
    slack: bool = False,
    workspace_id: int | None = None,
    specific: bool = False,
    states: Sequence[str] = (),
    log_regexes: Sequence[str] = (),
) -> Webhook:
    """Create a webhook firing on each of ``states`` and each of ``log_regexes``."""
    triggers: list[dict[str, Any]] = [
        {
            "triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
            "condition": {"state": state.upper()},
        }
        for state in states
    ] + [
        {"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": regex}}
        for regex in log_regexes
    ]
    body = {
        "name": name,
        "url": url,
        "webhookType": "WEBHOOK_TYPE_SLACK" if slack else "WEBHOOK_TYPE_DEFAULT",
        "mode": "WEBHOOK_MODE_SPECIFIC" if specific else "WEBHOOK_MODE_WORKSPACE",
        "workspaceId": workspace_id,
        "triggers": triggers,
    }
    answer = PostWebhookResponse.model_validate(session.post("/api/v1/webhooks", body))
    return Webhook.of(answer.webhook)


def delete_webhook(session: Session, webhook_id: int) -> None:
    """Delete a webhook (its undelivered events are dropped)."""
    session.request("DELETE", f"/api/v1/webhooks/{webhook_id}")


def test_webhook(session: Session, webhook_id: int) -> None:
    """Post a test event now; FailedPreconditionError if the receiver does not take it."""
    session.post(f"/api/v1/webhooks/{webhook_id}/test")


def list_deliveries(session: Session, webhook_id: int, *, limit: int = 50) -> list[WebhookDelivery]:
    """The webhook's latest events and how their delivery went, newest first."""
    path = f"/api/v1/webhooks/{webhook_id}/deliveries"
    found = session.get(path, WebhookDeliveriesResponse, params={"limit": str(limit)})
    return found.deliveries
