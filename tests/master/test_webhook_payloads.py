"""Webhook bodies (Determined's shapes) and the signature (pure functions)."""

from __future__ import annotations

import datetime as dt
import json
import uuid

from stalwart.master.services.webhook_payloads import (
    CustomData,
    ExperimentFacts,
    TaskLogFacts,
    custom_body,
    dumps,
    experiment_body,
    ping_body,
    sign,
    signature_headers,
    task_log_body,
    verify,
)

NOW = dt.datetime(2026, 12, 4, 10, 0, 0, tzinfo=dt.UTC)
FACTS = ExperimentFacts(
    id=41,
    state="COMPLETED",
    name="cifar10",
    start_time=NOW - dt.timedelta(seconds=3725),
    end_time=NOW - dt.timedelta(seconds=5),
    resource_pool="default",
    slots_per_trial=2,
    workspace="Uncategorized",
    project="Uncategorized",
)


def test_signature_is_hmac_sha256_of_timestamp_comma_body() -> None:
    # printf '%s' '1665689991,{"a":1}' | openssl dgst -sha256 -hmac 'k3y'
    expected = "bfcdc136459452bc86546725b685c93c13b43c748e488786216c5349cfc21ae3"
    assert sign("k3y", 1665689991, '{"a":1}') == expected
    headers = signature_headers("k3y", '{"a":1}', timestamp=1665689991)
    assert headers["X-Determined-AI-Signature-Timestamp"] == "1665689991"
    assert headers["X-Determined-AI-Signature"] == expected
    assert verify("k3y", headers, '{"a":1}')
    assert verify("k3y", {k.lower(): v for k, v in headers.items()}, '{"a":1}')
    assert not verify("k3y", headers, '{"a":2}')
    assert not verify("other", headers, '{"a":1}')
    assert not verify("k3y", {}, '{"a":1}')


def test_experiment_state_change_body() -> None:
    body = experiment_body("DEFAULT", FACTS, now=NOW)
    assert uuid.UUID(body.pop("event_id"))
    assert body == {
        "event_type": "EXPERIMENT_STATE_CHANGE",
        "timestamp": int(NOW.timestamp()),
        "condition": {"state": "COMPLETED"},
        "event_data": {
            "experiment": {
                "id": 41,
                "state": "COMPLETED",
                "name": "cifar10",
                "duration": 3720,
                "resource_pool": "default",
                "slots_per_trial": 2,
                "workspace": "Uncategorized",
                "project": "Uncategorized",
            }
        },
    }


def test_each_event_has_its_own_id_and_the_text_is_compact_json() -> None:
    one, two = (
        experiment_body("DEFAULT", FACTS, now=NOW),
        experiment_body("DEFAULT", FACTS, now=NOW),
    )
    assert one["event_id"] != two["event_id"]
    text = dumps(one)
    assert json.loads(text) == one
    assert ", " not in text


def test_task_log_body() -> None:
    facts = TaskLogFacts(task_id="t-1", node_name="node-a", triggering_log="CUDA OOM")
    body = task_log_body("DEFAULT", facts, "OOM", now=NOW)
    assert body["event_type"] == "TASK_LOG"
    assert body["condition"] == {"regex": "OOM"}
    assert body["event_data"] == {
        "task_log": {"task_id": "t-1", "node_name": "node-a", "triggering_log": "CUDA OOM"}
    }


def test_slack_bodies() -> None:
    body = experiment_body("SLACK", FACTS, now=NOW, base_url="https://ui.example")
    assert body["blocks"][0]["text"]["text"] == "Your experiment completed successfully 🎉"
    attachment = body["attachments"][0]
    assert attachment["color"] == "#13B670"
    block = attachment["blocks"][0]
    assert block["text"]["text"] == "✅ <https://ui.example/experiments/41 | cifar10 (#41)>"
    assert {"type": "mrkdwn", "text": "*Duration*: 1h 2min"} in block["fields"]
    errored = experiment_body(
        "SLACK", ExperimentFacts(**{**FACTS.__dict__, "state": "ERROR"}), now=NOW
    )
    assert errored["attachments"][0]["color"] == "#DD5040"
    assert errored["attachments"][0]["blocks"][0]["text"]["text"] == "❌ cifar10 (#41)"
    facts = TaskLogFacts("t-1", "node-a", "OOM!", "TRIAL", experiment_id=3, trial_id=7)
    text = task_log_body("SLACK", facts, "OOM", now=NOW)["blocks"][0]["text"]["text"]
    assert text.startswith("Experiment ID `3`, Trial ID `7`, running on node `node-a`")
    assert "```OOM!```" in text
    assert text.endswith("View full logs at /experiments/3/trials/7")
    assert ping_body("SLACK", now=NOW)["blocks"][0]["text"]["text"] == "test"
    assert ping_body("DEFAULT", now=NOW)["event_data"] == {"data": "test"}


def test_custom_body() -> None:
    data = CustomData(title="spike", description="loss 9", level="WARNING")
    body = custom_body("DEFAULT", FACTS, data, trial_id=7, now=NOW)
    assert body["event_type"] == "CUSTOM"
    assert body["condition"] == {"state": "COMPLETED"}
    assert body["event_data"]["custom_data"] == {
        "title": "spike",
        "description": "loss 9",
        "level": "WARNING",
    }
    assert body["event_data"]["experiment"]["trial_id"] == 7
    slack = custom_body("SLACK", FACTS, data, trial_id=7, now=NOW)
    assert slack["blocks"][0]["text"]["text"] == "Event Data"
    assert {"type": "mrkdwn", "text": "*Title*: spike"} in slack["blocks"][0]["fields"]
    fields = slack["attachments"][0]["blocks"][0]["fields"]
    assert {"type": "mrkdwn", "text": "*Trial ID*: 7"} in fields
