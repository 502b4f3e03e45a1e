"""Webhooks through the API (the shapes the official client's bindings send and read), and the
outbox: which events become deliveries, in the event's own transaction."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.master.db.tables import (
    Experiment,
    Project,
    Trial,
    WebhookDelivery,
    WebhookLogMatch,
    Workspace,
)
from stalwart.master.services.logs import NewLog, add_logs
from stalwart.master.transitions import set_experiment_state
from tests.master.conftest import login
from tests.master.test_experiments_api import add_trial, complete, master, new_experiment
from tests.master.test_users import create

Headers = dict[str, str]

STATE_TRIGGER = {
    "triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
    "condition": {"state": "COMPLETED"},
}


def webhook(
    client: TestClient,
    headers: Headers,
    *,
    url: str = "http://127.0.0.1:9/hook",
    triggers: list[dict[str, Any]] | None = None,
    expect: int = 200,
    **fields: Any,
) -> dict[str, Any]:
    """POST /api/v1/webhooks the way ``bindings.post_PostWebhook`` does."""
    body = {
        "mode": "WEBHOOK_MODE_WORKSPACE",
        "name": "hook",
        "url": url,
        "webhookType": "WEBHOOK_TYPE_DEFAULT",
        "id": None,
        "triggers": [STATE_TRIGGER] if triggers is None else triggers,
        "workspaceId": None,
        **fields,
    }
    resp = client.post("/api/v1/webhooks", json=body, headers=headers)
    assert resp.status_code == expect, resp.text
    answer: dict[str, Any] = resp.json()
    made: dict[str, Any] = answer.get("webhook", answer)
    return made


def deliveries(client: TestClient) -> list[WebhookDelivery]:
    with master(client).sessions() as session:
        return list(session.scalars(select(WebhookDelivery).order_by(WebhookDelivery.id)))


def user(client: TestClient, admin: Headers, name: str, role: str | None = None) -> Headers:
    created = create(client, admin, name)
    if role is not None:
        resp = client.put(
            f"/api/v1/workspaces/1/roles/users/{created['id']}", json={"role": role}, headers=admin
        )
        assert resp.status_code == 200, resp.text
    return login(client, name, "Secret-Pa55")


# --- managing ---


def test_create_list_patch_delete_in_determined_shapes(client: TestClient, admin: Headers) -> None:
    made = webhook(
        client,
        admin,
        triggers=[
            STATE_TRIGGER,
            {"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "OOM"}},
        ],
        webhookType="WEBHOOK_TYPE_SLACK",
        name="alerts",
    )
    assert made["id"] > 0
    assert made["workspaceId"] == 0
    assert made["mode"] == "WEBHOOK_MODE_WORKSPACE"
    assert made["webhookType"] == "WEBHOOK_TYPE_SLACK"
    assert [t["triggerType"] for t in made["triggers"]] == [
        "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
        "TRIGGER_TYPE_TASK_LOG",
    ]
    assert made["triggers"][1]["condition"] == {"regex": "OOM"}
    assert all(t["webhookId"] == made["id"] and t["id"] for t in made["triggers"])

    listed = client.get("/api/v1/webhooks", headers=admin).json()["webhooks"]
    assert [w["id"] for w in listed] == [made["id"]]

    resp = client.patch(
        f"/api/v1/webhooks/{made['id']}", json={"url": "https://example.com/x"}, headers=admin
    )
    assert resp.status_code == 200
    assert resp.json() == {}
    listed = client.get("/api/v1/webhooks", headers=admin).json()["webhooks"]
    assert listed[0]["url"] == "https://example.com/x"

    assert client.delete(f"/api/v1/webhooks/{made['id']}", headers=admin).status_code == 200
    assert client.get("/api/v1/webhooks", headers=admin).json() == {"webhooks": []}
    assert client.delete(f"/api/v1/webhooks/{made['id']}", headers=admin).status_code == 404


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"triggers": []}, "at least one trigger"),
        ({"url": "not a url"}, "valid url required"),
        ({"url": "ftp://host/x"}, "valid url required"),
        ({"webhookType": "WEBHOOK_TYPE_UNSPECIFIED"}, "unknown webhook type"),
        (
            {"triggers": [{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "("}}]},
            "invalid regex",
        ),
        (
            {"triggers": [{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"x": "y"}}]},
            "condition",
        ),
        (
            {
                "triggers": [
                    {"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "(a+)+$"}}
                ]
            },
            "repeats a repetition",
        ),
        (
            {
                "triggers": [
                    {
                        "triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
                        "condition": {"state": "DONE"},
                    }
                ]
            },
            "unknown experiment state",
        ),
        (
            {"triggers": [{"triggerType": "TRIGGER_TYPE_METRIC_THRESHOLD_EXCEEDED"}]},
            "unknown trigger type",
        ),
        ({"workspaceId": 999}, "workspace 999 not found"),
    ],
)
def test_invalid_webhooks_are_refused(
    client: TestClient, admin: Headers, fields: dict[str, Any], message: str
) -> None:
    answer = webhook(client, admin, expect=404 if "workspace" in message else 400, **fields)
    assert message in answer["error"]["error"]


def test_state_conditions_accept_the_state_prefix(client: TestClient, admin: Headers) -> None:
    made = webhook(
        client,
        admin,
        triggers=[
            {
                "triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
                "condition": {"state": "STATE_ERROR"},
            }
        ],
    )
    assert made["triggers"][0]["condition"] == {"state": "ERROR"}


def test_who_manages_which_webhooks(client: TestClient, admin: Headers) -> None:
    member = user(client, admin, "mem")  # the workspace's default role: member
    editor = user(client, admin, "ed", "editor")
    refused = webhook(client, member, expect=403)
    assert "only cluster admins" in refused["error"]["error"]
    assert "editor or admin" in webhook(client, member, workspaceId=1, expect=403)["error"]["error"]
    assert "only cluster admins" in webhook(client, editor, expect=403)["error"]["error"]
    theirs = webhook(client, editor, workspaceId=1, name="ws")
    assert theirs["workspaceId"] == 1
    global_ = webhook(client, admin, name="global")
    # a user sees the webhooks they may manage (URLs are often secrets)
    assert [w["id"] for w in client.get("/api/v1/webhooks", headers=editor).json()["webhooks"]] == [
        theirs["id"]
    ]
    assert client.get("/api/v1/webhooks", headers=member).json() == {"webhooks": []}
    admin_sees = client.get("/api/v1/webhooks", headers=admin).json()["webhooks"]
    assert {w["id"] for w in admin_sees} == {theirs["id"], global_["id"]}
    assert client.delete(f"/api/v1/webhooks/{global_['id']}", headers=editor).status_code == 403
    assert client.delete(f"/api/v1/webhooks/{theirs['id']}", headers=member).status_code == 403
    patched = client.patch(
        f"/api/v1/webhooks/{global_['id']}", json={"url": "http://x/y"}, headers=editor
    )
    assert patched.status_code == 403
    assert client.post(f"/api/v1/webhooks/{global_['id']}/test", headers=editor).status_code == 403
    assert client.delete(f"/api/v1/webhooks/{theirs['id']}", headers=editor).status_code == 200


def test_test_of_an_unreachable_receiver_is_a_400(client: TestClient, admin: Headers) -> None:
    made = webhook(client, admin, url="http://127.0.0.1:9/nothing-listens")
    resp = client.post(f"/api/v1/webhooks/{made['id']}/test", headers=admin)
    assert resp.status_code == 400
    assert "did not take the test event" in resp.json()["error"]["error"]


# --- the outbox: experiment state changes ---


def test_a_completed_experiment_adds_its_delivery(client: TestClient, admin: Headers) -> None:
    made = webhook(client, admin)
    errors = webhook(
        client,
        admin,
        triggers=[
            {"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": {"state": "ERROR"}}
        ],
    )
    exp_id = new_experiment(client, admin, name="done")
    assert deliveries(client) == []
    complete(client, exp_id)
    rows = deliveries(client)
    assert [(r.webhook_id, r.event_type, r.state, r.attempts) for r in rows] == [
        (made["id"], "EXPERIMENT_STATE_CHANGE", "PENDING", 0)
    ]
    body = json.loads(rows[0].payload)
    assert body["event_type"] == "EXPERIMENT_STATE_CHANGE"
    assert body["condition"] == {"state": "COMPLETED"}
    experiment = body["event_data"]["experiment"]
    assert experiment["id"] == exp_id
    assert experiment["state"] == "COMPLETED"
    assert experiment["name"] == "done"
    assert experiment["workspace"] == "Uncategorized"
    assert experiment["project"] == "Uncategorized"
    assert set(experiment) == {
        "id",
        "state",
        "name",
        "duration",
        "resource_pool",
        "slots_per_trial",
        "workspace",
        "project",
    }
    assert errors["id"] not in {r.webhook_id for r in rows}


def test_a_rolled_back_change_delivers_nothing(client: TestClient, admin: Headers) -> None:
    webhook(client, admin)
    exp_id = new_experiment(client, admin)
    with master(client).sessions() as session:
        exp = session.get(Experiment, exp_id)
        assert exp is not None
        set_experiment_state(session, exp, "STOPPING_COMPLETED")
        set_experiment_state(session, exp, "COMPLETED")
        session.rollback()
    assert deliveries(client) == []


def _configured(client: TestClient, admin: Headers, integrations: str) -> int:
    exp_id = new_experiment(client, admin)
    with master(client).sessions() as session:
        exp = session.get(Experiment, exp_id)
        assert exp is not None
        exp.config = {**exp.config, "integrations": json.loads(integrations)}
        session.commit()
    return exp_id


def test_specific_webhooks_fire_only_for_experiments_that_name_them(
    client: TestClient, admin: Headers
) -> None:
    by_name = webhook(client, admin, name="named", mode="WEBHOOK_MODE_SPECIFIC")
    by_id = webhook(client, admin, name="other", mode="WEBHOOK_MODE_SPECIFIC")
    everyone = webhook(client, admin, name="all")
    plain = new_experiment(client, admin)
    naming = _configured(client, admin, '{"webhooks": {"webhook_name": ["named"]}}')
    numbering = _configured(client, admin, json.dumps({"webhooks": {"webhook_id": [by_id["id"]]}}))
    excluded = _configured(
        client, admin, '{"webhooks": {"webhook_name": ["named"], "exclude": true}}'
    )
    for exp_id in (plain, naming, numbering, excluded):
        complete(client, exp_id)
    fired = {
        (json.loads(r.payload)["event_data"]["experiment"]["id"], r.webhook_id)
        for r in deliveries(client)
    }
    assert fired == {
        (plain, everyone["id"]),
        (naming, everyone["id"]),
        (naming, by_name["id"]),
        (numbering, everyone["id"]),
        (numbering, by_id["id"]),
    }


def test_workspace_webhooks_fire_only_in_their_workspace(
    client: TestClient, admin: Headers
) -> None:
    mine = webhook(client, admin, workspaceId=1)
    exp_id = new_experiment(client, admin)
    elsewhere = new_experiment(client, admin, name="far")
    with master(client).sessions() as session:
        other = Workspace(name="elsewhere")
        session.add(other)
        session.flush()
        project = Project(name="p", workspace_id=other.id)
        session.add(project)
        session.flush()
        exp = session.get(Experiment, elsewhere)
        assert exp is not None
        exp.project_id = project.id
        session.commit()
    complete(client, exp_id)
    complete(client, elsewhere)
    ids = [json.loads(r.payload)["event_data"]["experiment"]["id"] for r in deliveries(client)]
    assert ids == [exp_id]
    assert {r.webhook_id for r in deliveries(client)} == {mine["id"]}


# --- the outbox: task logs ---


def _log(task_id: str, text: str) -> NewLog:
    return NewLog(task_id=task_id, log=text, agent_id="node-a")


def test_a_matching_log_line_fires_once_per_task(client: TestClient, admin: Headers) -> None:
    made = webhook(
        client,
        admin,
        triggers=[{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": r"loss=\d+\.5"}}],
    )
    exp_id = new_experiment(client, admin)
    trial_id, _run, _token, _alloc = add_trial(client, exp_id)
    with master(client).sessions() as session:
        trial = session.get(Trial, trial_id)
        assert trial is not None
        task_id = trial.task_id
        add_logs(session, [_log(task_id, "loss=0.25"), _log(task_id, "step 1 loss=0.5 ok")])
        session.commit()
        add_logs(session, [_log(task_id, "loss=1.5")])  # fired already for this task
        session.commit()
    rows = deliveries(client)
    assert len(rows) == 1
    assert rows[0].webhook_id == made["id"]
    body = json.loads(rows[0].payload)
    assert body["event_type"] == "TASK_LOG"
    assert body["condition"] == {"regex": r"loss=\d+\.5"}
    assert body["event_data"] == {
        "task_log": {
            "task_id": task_id,
            "node_name": "node-a",
            "triggering_log": "step 1 loss=0.5 ok",
        }
    }
    with master(client).sessions() as session:
        assert session.scalars(select(WebhookLogMatch.task_id)).all() == [task_id]


def test_log_lines_without_webhooks_or_matches_add_nothing(
    client: TestClient, admin: Headers
) -> None:
    exp_id = new_experiment(client, admin)
    trial_id, _run, _token, _alloc = add_trial(client, exp_id)
    with master(client).sessions() as session:
        trial = session.get(Trial, trial_id)
        assert trial is not None
        add_logs(session, [_log(trial.task_id, "OOM")])
        session.commit()
    assert deliveries(client) == []
    webhook(
        client,
        admin,
        triggers=[{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": "^OOM$"}}],
    )
    with master(client).sessions() as session:
        add_logs(session, [_log(trial.task_id, "no OOM here")])
        session.commit()
    assert deliveries(client) == []
    with master(client).sessions() as session:
        add_logs(session, [_log(trial.task_id, "OOM")])  # the new webhook is seen at once
        session.commit()
    assert len(deliveries(client)) == 1


def test_deleting_a_webhook_drops_its_undelivered_events(
    client: TestClient, admin: Headers
) -> None:
    made = webhook(client, admin)
    complete(client, new_experiment(client, admin))
    assert len(deliveries(client)) == 1
    listed = client.get(f"/api/v1/webhooks/{made['id']}/deliveries", headers=admin).json()
    assert [d["state"] for d in listed["deliveries"]] == ["PENDING"]
    assert client.delete(f"/api/v1/webhooks/{made['id']}", headers=admin).status_code == 200
    assert deliveries(client) == []


# --- custom events: a trial's core_context.alert() ---

CUSTOM = {"triggerType": "TRIGGER_TYPE_CUSTOM", "condition": {}}


def alert(client: TestClient, headers: Headers, experiment_id: int, trial_id: int) -> Any:
    """POST /api/v1/webhooks/custom as ``core_context.alert(...)`` does."""
    body = {
        "data": {"title": "loss spiked", "description": "at step 7", "level": "LOG_LEVEL_WARNING"},
        "experimentId": experiment_id,
        "trialId": trial_id,
    }
    return client.post("/api/v1/webhooks/custom", json=body, headers=headers)


def test_custom_triggers_need_the_specific_mode(client: TestClient, admin: Headers) -> None:
    refused = webhook(client, admin, triggers=[CUSTOM], expect=400)
    assert "WEBHOOK_MODE_SPECIFIC" in refused["error"]["error"]


def test_an_alert_goes_to_the_webhooks_its_experiment_names(
    client: TestClient, admin: Headers
) -> None:
    named = webhook(client, admin, name="alerts", mode="WEBHOOK_MODE_SPECIFIC", triggers=[CUSTOM])
    webhook(client, admin, name="unnamed", mode="WEBHOOK_MODE_SPECIFIC", triggers=[CUSTOM])
    exp_id = _configured(client, admin, '{"webhooks": {"webhook_name": ["alerts"]}}')
    trial_id, _run, token, _alloc = add_trial(client, exp_id, allocation="RUNNING")
    assert token is not None
    task = {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}
    resp = alert(client, task, exp_id, trial_id)
    assert resp.status_code == 200, resp.text
    (row,) = deliveries(client)
    assert (row.webhook_id, row.event_type) == (named["id"], "CUSTOM")
    body = json.loads(row.payload)
    assert body["event_type"] == "CUSTOM"
    assert body["event_data"]["custom_data"] == {
        "title": "loss spiked",
        "description": "at step 7",
        "level": "WARNING",
    }
    assert body["event_data"]["experiment"]["id"] == exp_id
    assert body["event_data"]["experiment"]["trial_id"] == trial_id

    other = new_experiment(client, admin)
    refused = alert(client, task, other, trial_id)  # a task alerts only about its experiment
    assert refused.status_code == 403
    plain = new_experiment(client, admin)
    assert alert(client, admin, plain, trial_id).status_code == 200  # names none: nothing
    assert len(deliveries(client)) == 1
