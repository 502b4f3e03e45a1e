"""Routes: webhooks, in Determined's shapes (``GET``/``POST /api/v1/webhooks``,
``DELETE``/``PATCH /api/v1/webhooks/{id}``, ``POST /api/v1/webhooks/{id}/test``,
``POST /api/v1/webhooks/custom``: a trial's ``core_context.alert()``) and
``GET /api/v1/webhooks/{id}/deliveries`` (a Stalwart extension: what was sent and how it went).

Who may do what is :func:`stalwart.master.policy.require_manage_webhooks`'s; the logic is
:mod:`stalwart.master.services.webhooks`'. The test event is posted from here, with the
delivery timeout, without holding a database session or a worker thread.
"""

from __future__ import annotations

import anyio.to_thread
import httpx
from fastapi import APIRouter

from stalwart.errors import FailedPreconditionError
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import Empty, wire_time
from stalwart.master.api.models.webhooks import (
    GetWebhooksResponse,
    PatchWebhookRequest,
    PostWebhookEventDataRequest,
    PostWebhookResponse,
    TestWebhookResponse,
    V1Trigger,
    V1Webhook,
    WebhookDeliveriesResponse,
    WebhookDelivery,
    WebhookRequest,
)
from stalwart.master.cluster.webhooks import post_once
from stalwart.master.db.tables import utcnow
from stalwart.master.services import webhook_events
from stalwart.master.services import webhooks as svc
from stalwart.master.services.webhook_payloads import CustomData, dumps, ping_body

__all__ = ["router"]

router = APIRouter(tags=["webhooks"])


def _wire(view: svc.WebhookView) -> V1Webhook:
    return V1Webhook(
        id=view.id,
        name=view.name,
        url=view.url,
        webhook_type=f"WEBHOOK_TYPE_{view.webhook_type}",
        mode=f"WEBHOOK_MODE_{view.mode}",
        workspace_id=view.workspace_id or 0,
        triggers=[
            V1Trigger(
                id=t.id,
                trigger_type=f"TRIGGER_TYPE_{t.trigger_type}",
                condition=t.condition,
                webhook_id=t.webhook_id,
            )
            for t in view.triggers
        ],
    )


@router.get("/webhooks", response_model=GetWebhooksResponse)
def get_webhooks(caller: CallerDep, session: SessionDep) -> GetWebhooksResponse:
    """The webhooks the caller may manage."""
    return GetWebhooksResponse(webhooks=[_wire(v) for v in svc.list_webhooks(session, caller.user)])


@router.post("/webhooks", response_model=PostWebhookResponse)
def post_webhook(
    body: WebhookRequest, caller: CallerDep, session: SessionDep
) -> PostWebhookResponse:
    """Create a webhook."""
    spec = svc.WebhookSpec(
        url=body.url,
        webhook_type=body.webhook_type,
        name=body.name,
        mode=body.mode or "",
        workspace_id=body.workspace_id,
        triggers=[
            svc.TriggerSpec(t.trigger_type or "", dict(t.condition or {}))
            for t in body.triggers or []
        ],
    )
    return PostWebhookResponse(webhook=_wire(svc.create_webhook(session, caller.user, spec)))


@router.post("/webhooks/custom", response_model=Empty)
def post_webhook_event_data(
    body: PostWebhookEventDataRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """An alert from a trial (``core_context.alert()``): posted to the CUSTOM triggers of the
    webhooks its experiment's config names."""
    data = body.data
    level = (data.level if data is not None else None) or "LOG_LEVEL_INFO"
    webhook_events.post_custom_event(
        session,
        caller.user,
        allocation_id=caller.allocation_id,
        experiment_id=body.experiment_id,
        trial_id=body.trial_id or None,
        data=CustomData(
            title=(data.title if data is not None else None) or "",
            description=(data.description if data is not None else None) or "",
            level=level.removeprefix("LOG_LEVEL_"),
        ),
    )
    return Empty()


@router.delete("/webhooks/{webhook_id}", response_model=Empty)
def delete_webhook(webhook_id: int, caller: CallerDep, session: SessionDep) -> Empty:
    """Delete a webhook (its undelivered events are dropped)."""
    svc.delete_webhook(session, caller.user, webhook_id)
    return Empty()


@router.patch("/webhooks/{webhook_id}", response_model=Empty)
def patch_webhook(
    webhook_id: int, body: PatchWebhookRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """Change a webhook's URL."""
    svc.update_webhook_url(session, caller.user, webhook_id, body.url)
    return Empty()


@router.post("/webhooks/{webhook_id}/test", response_model=TestWebhookResponse)
async def test_webhook(webhook_id: int, caller: CallerDep, state: StateDep) -> TestWebhookResponse:
    """Post a test event to the webhook now; 400 if the receiver does not take it."""

    def prepare() -> tuple[svc.WebhookView, str]:
        with state.sessions() as session:
            view = svc.get_manageable(session, caller.user, webhook_id)
            key = svc.signing_key(session, state.settings.webhooks, state.settings.home)
            return view, key

    view, key = await anyio.to_thread.run_sync(prepare)
    body = dumps(ping_body(view.webhook_type, now=utcnow()))
    timeout = state.settings.webhooks.attempt_timeout
    async with httpx.AsyncClient(follow_redirects=True) as client:
        outcome = await post_once(client, view.url, body, key, timeout=timeout)
    if not outcome.delivered:
        raise FailedPreconditionError(
            f"webhook {webhook_id} did not take the test event: {outcome.error}"
        )
    return TestWebhookResponse(completed=True)


@router.get("/webhooks/{webhook_id}/deliveries", response_model=WebhookDeliveriesResponse)
def get_webhook_deliveries(
    webhook_id: int, caller: CallerDep, session: SessionDep, limit: int = 50
) -> WebhookDeliveriesResponse:
    """The webhook's latest events and how their delivery went, newest first."""
    rows = svc.list_deliveries(session, caller.user, webhook_id, limit=limit)
    return WebhookDeliveriesResponse(
        deliveries=[
            WebhookDelivery(
                id=d.id,
                webhook_id=d.webhook_id,
                event_type=d.event_type,
                state=d.state,
                attempts=d.attempts,
                created_at=wire_time(d.created_at),
                next_attempt_at=wire_time(d.next_attempt_at) if d.state == "PENDING" else None,
                finished_at=wire_time(d.finished_at),
                last_error=d.last_error,
                payload=d.payload,
            )
            for d in rows
        ]
    )
