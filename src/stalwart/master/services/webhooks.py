"""Webhooks: managing them (the events they get: :mod:`stalwart.master.services.webhook_events`).

Contracts:

- **Managing** (:func:`create_webhook`, :func:`list_webhooks`, :func:`delete_webhook`,
  :func:`update_webhook_url`, :func:`list_deliveries`): a global webhook (``workspace_id``
  None) is managed by cluster admins, a workspace's by its editors and admins
  (:func:`stalwart.master.policy.require_manage_webhooks`); a user sees the webhooks they may
  manage. Each commits.
- **Validation**: an http(s) URL, at least one trigger; a task-log trigger's regex compiles and
  repeats no repetition (:func:`_nested_repeat`); a state trigger names an experiment state; a
  custom trigger needs the ``SPECIFIC`` mode.
"""

from __future__ import annotations

import datetime as dt
import importlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master import policy
from stalwart.master.db.tables import (
    MasterMeta,
    User,
    Webhook,
    WebhookDelivery,
    WebhookLogMatch,
    WebhookTrigger,
    Workspace,
)
from stalwart.master.services.webhook_events import mark_changed
from stalwart.master.transitions import EXPERIMENT_TRANSITIONS

if TYPE_CHECKING:
    from stalwart.master.settings import WebhookSettings

__all__ = [
    "MODES",
    "TRIGGER_TYPES",
    "WEBHOOK_TYPES",
    "Delivery",
    "TriggerSpec",
    "WebhookSpec",
    "WebhookView",
    "create_webhook",
    "delete_webhook",
    "get_manageable",
    "list_deliveries",
    "list_webhooks",
    "signing_key",
    "update_webhook_url",
]

TRIGGER_TYPES = ("EXPERIMENT_STATE_CHANGE", "TASK_LOG", "CUSTOM")
WEBHOOK_TYPES = ("DEFAULT", "SLACK")
MODES = ("WORKSPACE", "SPECIFIC")


# --- specs and views ---


@dataclass(frozen=True)
class TriggerSpec:
    """A trigger as asked for: a type (``EXPERIMENT_STATE_CHANGE`` or ``TASK_LOG``; the wire's
    ``TRIGGER_TYPE_`` prefix is accepted) and its condition."""

    trigger_type: str
    condition: dict[str, Any]


@dataclass(frozen=True)
class WebhookSpec:
    """A webhook to create."""

    url: str
    webhook_type: str = "DEFAULT"
    name: str = ""
    mode: str = "WORKSPACE"
    workspace_id: int | None = None
    triggers: Sequence[TriggerSpec] = ()


@dataclass(frozen=True)
class TriggerView:
    id: int
    webhook_id: int
    trigger_type: str
    condition: dict[str, Any]


@dataclass(frozen=True)
class WebhookView:
    """A stored webhook with its triggers, detached from any session."""

    id: int
    name: str
    url: str
    webhook_type: str
    mode: str
    workspace_id: int | None
    triggers: list[TriggerView]


@dataclass(frozen=True)
class Delivery:
    """One delivery (event) of a webhook, detached."""

    id: int
    webhook_id: int
    event_type: str
    state: str
    attempts: int
    created_at: dt.datetime
    next_attempt_at: dt.datetime
    finished_at: dt.datetime | None
    last_error: str | None
    payload: str

    @classmethod
    def of(cls, row: WebhookDelivery) -> Delivery:
        return cls(
            id=row.id,
            webhook_id=row.webhook_id,
            event_type=row.event_type,
            state=row.state,
            attempts=row.attempts,
            created_at=row.created_at,
            next_attempt_at=row.next_attempt_at,
            finished_at=row.finished_at,
            last_error=row.last_error,
            payload=row.payload,
        )


def _enum(value: str, prefix: str, allowed: Sequence[str], what: str) -> str:
    name = (value or "").strip().upper().removeprefix(prefix)
    if name not in allowed:
        raise InvalidArgumentError(
            f"unknown {what} {value!r}: use one of {', '.join(prefix + a for a in allowed)}"
        )
    return name


def _check_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgumentError(f"valid url required: {url!r} is not an http(s) URL")
    return url.strip()


def _condition(trigger_type: str, condition: dict[str, Any] | None) -> dict[str, Any]:
    given = dict(condition or {})
    if trigger_type == "CUSTOM":
        return given  # fired by alerts, whatever the condition says
    if trigger_type == "TASK_LOG":
        regex = given.get("regex")
        if set(given) != {"regex"} or not isinstance(regex, str) or not regex:
            raise InvalidArgumentError(
                f"a task log trigger's condition is {{'regex': '<pattern>'}}, got {given}"
            )
        try:
            re.compile(regex)
        except re.error as exc:
            raise InvalidArgumentError(f"invalid regex {regex!r}: {exc}") from exc
        if _nested_repeat(regex):
            raise InvalidArgumentError(
                f"regex {regex!r} repeats a repetition (like (a+)+): it can take exponential "
                "time on some lines, and every log line of the cluster is searched with it; "
                "write it without nested repetition"
            )
        return {"regex": regex}
    state = given.get("state")
    if set(given) != {"state"} or not isinstance(state, str):
        raise InvalidArgumentError(
            f"an experiment state change trigger's condition is {{'state': 'COMPLETED'}} (or "
            f"another experiment state), got {given}"
        )
    return {"state": _enum(state, "STATE_", tuple(EXPERIMENT_TRANSITIONS), "experiment state")}


def _nested_repeat(pattern: str) -> bool:
    """Whether ``pattern`` holds an unbounded repetition inside another one (star height > 1,
    ``(a+)+``, ``(?:x*y)*``): the shape that makes a backtracking engine take exponential time.
    Log lines are searched in the ingest path, so such patterns are refused."""
    sre: Any = importlib.import_module("re._constants")  # the stdlib's own parser
    sre_parse: Any = importlib.import_module("re._parser")

    repeats = (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None))

    def walk(items: Any, inside: bool) -> bool:
        for op, arg in items:
            if op is not None and op in repeats:
                unbounded = arg[1] == sre.MAXREPEAT
                found = (unbounded and inside) or walk(arg[2], inside or unbounded)
            elif op is sre.SUBPATTERN:
                found = walk(arg[-1], inside)
            elif op is sre.BRANCH:
                found = any(walk(branch, inside) for branch in arg[1])
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                found = walk(arg[1], inside)
            else:
                found = False
            if found:
                return True
        return False

    try:
        return walk(sre_parse.parse(pattern).data, False)
    except Exception:  # a parser of another Python version: do not refuse
        return False


def _view(session: Session, webhook: Webhook) -> WebhookView:
    rows = session.scalars(
        select(WebhookTrigger)
        .where(WebhookTrigger.webhook_id == webhook.id)
        .order_by(WebhookTrigger.id)
    )
    return WebhookView(
        id=webhook.id,
        name=webhook.name,
        url=webhook.url,
        webhook_type=webhook.webhook_type,
        mode=webhook.mode,
        workspace_id=webhook.workspace_id,
        triggers=[TriggerView(t.id, t.webhook_id, t.trigger_type, dict(t.condition)) for t in rows],
    )


# --- managing ---


def create_webhook(session: Session, user: User, spec: WebhookSpec) -> WebhookView:
    """Validate and store a webhook (see the contract for who may)."""
    workspace_id = spec.workspace_id or None  # Determined's 0 means global
    if workspace_id is not None and session.get(Workspace, workspace_id) is None:
        raise NotFoundError(f"workspace {workspace_id} not found")
    policy.require_manage_webhooks(session, user, workspace_id)
    url = _check_url(spec.url)
    webhook_type = _enum(spec.webhook_type, "WEBHOOK_TYPE_", WEBHOOK_TYPES, "webhook type")
    mode_name = spec.mode.strip().upper().removeprefix("WEBHOOK_MODE_")
    mode = "WORKSPACE" if mode_name in ("", "UNSPECIFIED") else mode_name
    mode = _enum(mode, "", MODES, "webhook mode")
    if not spec.triggers:
        raise InvalidArgumentError("at least one trigger required")
    triggers = []
    for given in spec.triggers:
        trigger_type = _enum(given.trigger_type, "TRIGGER_TYPE_", TRIGGER_TYPES, "trigger type")
        if trigger_type == "CUSTOM" and mode != "SPECIFIC":
            raise InvalidArgumentError(
                "a custom trigger only works on a webhook with the mode WEBHOOK_MODE_SPECIFIC"
            )
        triggers.append((trigger_type, _condition(trigger_type, given.condition)))
    webhook = Webhook(
        name=spec.name.strip(),
        url=url,
        webhook_type=webhook_type,
        mode=mode,
        workspace_id=workspace_id,
        created_by=user.id,
    )
    session.add(webhook)
    session.flush()
    session.add_all(
        WebhookTrigger(webhook_id=webhook.id, trigger_type=t, condition=c) for t, c in triggers
    )
    session.flush()
    view = _view(session, webhook)
    mark_changed(session)
    session.commit()
    return view


def list_webhooks(session: Session, user: User) -> list[WebhookView]:
    """The webhooks ``user`` may manage, by id."""
    query = select(Webhook).order_by(Webhook.id)
    workspaces = policy.webhook_workspaces(session, user)
    if workspaces is not None:
        query = query.where(Webhook.workspace_id.in_(workspaces))
    return [_view(session, w) for w in session.scalars(query)]


def get_manageable(session: Session, user: User, webhook_id: int) -> WebhookView:
    """Webhook ``webhook_id``, if ``user`` may manage it (NotFoundError / ForbiddenError)."""
    webhook = session.get(Webhook, webhook_id)
    if webhook is None:
        raise NotFoundError(f"webhook {webhook_id} not found")
    policy.require_manage_webhooks(session, user, webhook.workspace_id)
    return _view(session, webhook)


def delete_webhook(session: Session, user: User, webhook_id: int) -> None:
    """Delete a webhook, its triggers and its undelivered events."""
    get_manageable(session, user, webhook_id)
    triggers = select(WebhookTrigger.id).where(WebhookTrigger.webhook_id == webhook_id)
    session.execute(delete(WebhookLogMatch).where(WebhookLogMatch.trigger_id.in_(triggers)))
    session.execute(delete(WebhookDelivery).where(WebhookDelivery.webhook_id == webhook_id))
    session.execute(delete(WebhookTrigger).where(WebhookTrigger.webhook_id == webhook_id))
    session.execute(delete(Webhook).where(Webhook.id == webhook_id))
    mark_changed(session)
    session.commit()


def update_webhook_url(session: Session, user: User, webhook_id: int, url: str) -> WebhookView:
    """Point a webhook at a new URL (events not yet delivered keep the old one)."""
    get_manageable(session, user, webhook_id)
    webhook = session.get(Webhook, webhook_id)
    assert webhook is not None
    webhook.url = _check_url(url)
    view = _view(session, webhook)
    mark_changed(session)
    session.commit()
    return view


def list_deliveries(
    session: Session, user: User, webhook_id: int, *, limit: int = 50
) -> list[Delivery]:
    """The webhook's latest deliveries, newest first."""
    get_manageable(session, user, webhook_id)
    rows = session.scalars(
        select(WebhookDelivery)
        .where(WebhookDelivery.webhook_id == webhook_id)
        .order_by(WebhookDelivery.id.desc())
        .limit(max(1, min(limit, 1000)))
    )
    return [Delivery.of(row) for row in rows]


def signing_key(session: Session, settings: WebhookSettings, home: Path) -> str:
    """The key that signs deliveries: ``webhooks.signing_key``, or the cluster's generated one
    (kept in the database and written to ``<home>/webhook_signing_key``, mode 0600)."""
    if settings.signing_key:
        return settings.signing_key
    found = session.get(MasterMeta, "webhook_signing_key")
    if found is None:
        found = MasterMeta(key="webhook_signing_key", value=secrets.token_hex(32))
        session.add(found)
        session.commit()
    path = home / "webhook_signing_key"
    if not path.exists() or path.read_text(encoding="utf-8").strip() != found.value:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        path.write_text(found.value + "\n", encoding="utf-8")
    return found.value
