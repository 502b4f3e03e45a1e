"""What a webhook receiver gets: the bodies and the signature (pure functions).

Bodies follow Determined 0.38's shapes, so receivers written for Determined keep working:

- **Default** webhooks get ``{event_id, event_type, timestamp, condition, event_data}``:
  ``event_type`` is ``EXPERIMENT_STATE_CHANGE`` (``condition: {state}``, ``event_data:
  {experiment: {id, state, name, duration, resource_pool, slots_per_trial, workspace,
  project}}``), ``TASK_LOG`` (``condition: {regex}``, ``event_data: {task_log: {task_id,
  node_name, triggering_log}}``) or ``CUSTOM`` (a trial's ``core_context.alert()``:
  ``condition: {state}`` (the experiment's), ``event_data: {experiment: {..., trial_id},
  custom_data: {title, description, level}}``); ``timestamp`` is the event's time in Unix
  seconds. A test event has ``event_data: {data: "test"}``.
- **Slack** webhooks get a Slack message (``blocks``, and for experiments a coloured
  ``attachments`` block), with links to the web UI when ``webhooks.base_url`` is set.

**Signature**: each attempt carries ``X-Determined-AI-Signature-Timestamp: <t>`` (Unix seconds
at sending) and ``X-Determined-AI-Signature: hex(HMAC-SHA256(key, "<t>,<body>"))`` over the
exact body bytes; :func:`signature_headers` builds them and :func:`verify` checks them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "CustomData",
    "ExperimentFacts",
    "TaskLogFacts",
    "custom_body",
    "dumps",
    "experiment_body",
    "ping_body",
    "sign",
    "signature_headers",
    "task_log_body",
    "verify",
]

TIMESTAMP_HEADER = "X-Determined-AI-Signature-Timestamp"
SIGNATURE_HEADER = "X-Determined-AI-Signature"


@dataclass(frozen=True)
class ExperimentFacts:
    """What an experiment event says about its experiment."""

    id: int
    state: str
    name: str
    start_time: dt.datetime
    end_time: dt.datetime | None
    resource_pool: str
    slots_per_trial: int
    workspace: str
    project: str
    workspace_id: int | None = None
    project_id: int | None = None


@dataclass(frozen=True)
class TaskLogFacts:
    """What a task-log event says about the line and its task."""

    task_id: str
    node_name: str
    triggering_log: str
    task_type: str = ""
    experiment_id: int | None = None
    trial_id: int | None = None


def dumps(body: dict[str, Any]) -> str:
    """The JSON text that is posted (and signed)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _seconds(when: dt.datetime) -> int:
    return int(when.timestamp())


def _duration(facts: ExperimentFacts, now: dt.datetime) -> float:
    end = facts.end_time or now
    return max(0.0, (end - facts.start_time).total_seconds())


def _event(
    event_type: str, condition: dict[str, Any], data: dict[str, Any], now: dt.datetime
) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "event_type": event_type,
        "timestamp": _seconds(now),
        "condition": condition,
        "event_data": data,
    }


def experiment_body(
    webhook_type: str, facts: ExperimentFacts, *, now: dt.datetime, base_url: str = ""
) -> dict[str, Any]:
    """The body of an ``EXPERIMENT_STATE_CHANGE`` event for ``facts.state``."""
    if webhook_type == "SLACK":
        return _slack_experiment(facts, now=now, base_url=base_url)
    experiment = {
        "id": facts.id,
        "state": facts.state,
        "name": facts.name,
        "duration": int(_duration(facts, now)),
        "resource_pool": facts.resource_pool,
        "slots_per_trial": facts.slots_per_trial,
        "workspace": facts.workspace,
        "project": facts.project,
    }
    return _event(
        "EXPERIMENT_STATE_CHANGE", {"state": facts.state}, {"experiment": experiment}, now
    )


@dataclass(frozen=True)
class CustomData:
    """What a trial's ``core_context.alert(title, description, level)`` sent."""

    title: str
    description: str
    level: str


def custom_body(
    webhook_type: str,
    facts: ExperimentFacts,
    data: CustomData,
    *,
    trial_id: int | None,
    now: dt.datetime,
    base_url: str = "",
) -> dict[str, Any]:
    """The body of a ``CUSTOM`` event (an alert from a trial of ``facts``' experiment)."""
    if webhook_type == "SLACK":
        body = _slack_experiment(facts, now=now, base_url=base_url, trial_id=trial_id)
        body["blocks"] = [
            {
                "type": "section",
                "text": {"type": "plain_text", "text": "Event Data"},
                "fields": [
                    {"type": "mrkdwn", "text": f"*Level*: {data.level}"},
                    {"type": "mrkdwn", "text": f"*Title*: {data.title}"},
                    {"type": "mrkdwn", "text": f"*Description*: {data.description}"},
                ],
            }
        ]
        return body
    experiment = experiment_body("DEFAULT", facts, now=now)["event_data"]["experiment"]
    if trial_id:
        experiment["trial_id"] = trial_id
    custom = {"title": data.title, "description": data.description, "level": data.level}
    return _event(
        "CUSTOM", {"state": facts.state}, {"experiment": experiment, "custom_data": custom}, now
    )


def task_log_body(
    webhook_type: str, facts: TaskLogFacts, regex: str, *, now: dt.datetime, base_url: str = ""
) -> dict[str, Any]:
    """The body of a ``TASK_LOG`` event: ``facts.triggering_log`` matched ``regex``."""
    if webhook_type == "SLACK":
        return _slack_task_log(facts, regex, base_url=base_url)
    data = {
        "task_log": {
            "task_id": facts.task_id,
            "node_name": facts.node_name,
            "triggering_log": facts.triggering_log,
        }
    }
    return _event("TASK_LOG", {"regex": regex}, data, now)


def ping_body(webhook_type: str, *, now: dt.datetime) -> dict[str, Any]:
    """What ``POST /api/v1/webhooks/{id}/test`` sends."""
    if webhook_type == "SLACK":
        return {"blocks": [{"type": "section", "text": {"type": "plain_text", "text": "test"}}]}
    return _event("EXPERIMENT_STATE_CHANGE", {"state": "COMPLETED"}, {"data": "test"}, now)


def _link(base_url: str, path: str, label: str) -> str:
    return f"<{base_url.rstrip('/')}{path} | {label}>" if base_url else label


def _slack_experiment(
    facts: ExperimentFacts, *, now: dt.datetime, base_url: str, trial_id: int | None = None
) -> dict[str, Any]:
    label = f"{facts.name} (#{facts.id})"
    link = _link(base_url, f"/experiments/{facts.id}", label)
    if facts.state == "COMPLETED":
        status, title, color = "Completed", "Your experiment completed successfully 🎉", "#13B670"
        link = f"✅ {link}"
    elif facts.state == "ERROR":
        status, title, color = "Errored", "Your experiment has stopped with errors", "#DD5040"
        link = f"❌ {link}"
    else:
        status, title = facts.state, f"The status of your experiment is {facts.state}"
        color = "#13B670"
    seconds = int(_duration(facts, now))
    fields = [
        {"type": "mrkdwn", "text": f"*Status*: {status}"},
        {"type": "mrkdwn", "text": f"*Duration*: {seconds // 3600}h {seconds % 3600 // 60}min"},
    ]
    if facts.workspace:
        fields.append({"type": "mrkdwn", "text": f"*Workspace*: {facts.workspace}"})
    if facts.project:
        fields.append({"type": "mrkdwn", "text": f"*Project*: {facts.project}"})
    if trial_id:
        fields.append({"type": "mrkdwn", "text": f"*Trial ID*: {trial_id}"})
    return {
        "blocks": [{"type": "section", "text": {"type": "plain_text", "text": title}}],
        "attachments": [
            {
                "color": color,
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": link}, "fields": fields}
                ],
            }
        ],
    }


def _slack_task_log(facts: TaskLogFacts, regex: str, *, base_url: str) -> dict[str, Any]:
    if facts.trial_id is not None and facts.experiment_id is not None:
        who = f"Experiment ID `{facts.experiment_id}`, Trial ID `{facts.trial_id}`"
        path = f"/experiments/{facts.experiment_id}/trials/{facts.trial_id}"
        more = (
            _link(base_url, path, "View full logs here")
            if base_url
            else f"View full logs at {path}"
        )
    else:
        kind = f", task type `{facts.task_type}`" if facts.task_type else ""
        who, more = f"Task ID `{facts.task_id}`{kind}", ""
    text = (
        f"{who}, running on node `{facts.node_name}`, reported a log\n"
        f"```{facts.triggering_log}```\nThis log matched the regex\n```{regex}```\n{more}"
    ).rstrip("\n")
    return {"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


def sign(key: str, timestamp: int, body: str) -> str:
    """``hex(HMAC-SHA256(key, "<timestamp>,<body>"))``."""
    message = f"{timestamp},{body}".encode()
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def signature_headers(key: str, body: str, *, timestamp: int) -> dict[str, str]:
    """The headers of one attempt to post ``body``."""
    return {
        "Content-Type": "application/json; charset=UTF-8",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(key, timestamp, body),
    }


def verify(key: str, headers: dict[str, str], body: str) -> bool:
    """Whether ``headers`` (as a receiver got them) sign ``body`` with ``key``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    given = lowered.get(SIGNATURE_HEADER.lower(), "")
    if not stamp.isdigit() or not given:
        return False
    return hmac.compare_digest(sign(key, int(stamp), body), given)
