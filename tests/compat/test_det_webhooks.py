"""Webhooks with the official 0.38.1 client library, a real master and agent, and a real HTTP
receiver on loopback.

0.38.1's ``det`` has no webhook command: the client library's generated ``bindings``
(``post_PostWebhook``, ``get_GetWebhooks``, ``patch_PatchWebhook``, ``post_TestWebhook``,
``delete_DeleteWebhook``, and ``post_PostWebhookEventData``, which ``core_context.alert()``
sends) over its own session are what Determined users' scripts call, so
``workflows/webhooks_client.py`` runs exactly those from the det venv. One experiment
(``workflows/trial.py``, four steps) runs with five webhooks at once: one on COMPLETED, one on
the log line ``STEP 3``, one whose receiver answers 500 first, one whose receiver hangs, and a
SPECIFIC one with a custom trigger that its config names (then alerted).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from stalwart.local import LocalCluster
from stalwart.master.services.webhook_payloads import verify
from tests.compat.conftest import Det, MasterProcess, _start_master, _stop, describe
from tests.webhook_receiver import HANG, Receiver, receiver

pytestmark = pytest.mark.compat

WORKFLOWS = Path(__file__).parent / "workflows"
KEY = "compat-signing-key"
WAIT_S = 90.0


@pytest.fixture(scope="module")
def stalwart_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """A master that signs with a known key and gives up on an attempt after 2 s."""
    workdir = tmp_path_factory.mktemp("master")
    config = workdir / "master.yaml"
    config.write_text(
        f"webhooks:\n  signing_key: {KEY}\n  attempt_timeout: 2\n  backoff: 0.2\n"
        "  max_attempts: 3\n",
        encoding="utf-8",
    )
    master = _start_master(workdir, ["--config", str(config)])
    try:
        yield master
    finally:
        _stop(master.process)


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    port = urlparse(stalwart_master.url).port
    assert port is not None
    cluster = LocalCluster(home=stalwart_master.home, port=port)
    cluster.start_agent("hooks", slots=1)
    try:
        yield cluster
    finally:
        cluster.stop_agent("hooks")


@pytest.fixture(scope="module")
def hooks() -> Iterator[Receiver]:
    with receiver() as found:
        yield found


def bindings(
    det: Det, action: str, *args: str, user: str = "admin", password: str = ""
) -> tuple[int, Any]:
    """Run one bindings call from the det venv: ``(0, result)`` or ``(3, refusal line)``."""
    python = det.executable.parent / "python"
    done = subprocess.run(
        [
            str(python),
            str(WORKFLOWS / "webhooks_client.py"),
            det.master.url,
            user,
            password,
            action,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=dict(det.env),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode in (0, 3), describe(done)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return 0, json.loads(line.removeprefix("RESULT "))
        if line.startswith("REFUSED "):
            return 3, line
    raise AssertionError(describe(done))


def create(det: Det, **fields: Any) -> dict[str, Any]:
    code, made = bindings(det, "create", json.dumps(fields))
    assert code == 0, made
    assert isinstance(made, dict)
    return made


def on_completed(url: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "url": url,
        "triggers": [
            {
                "triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE",
                "condition": {"state": "COMPLETED"},
            }
        ],
    }


def deliveries(master: MasterProcess, webhook_id: int) -> list[dict[str, Any]]:
    token = httpx.post(
        f"{master.url}/api/v1/auth/login", json={"username": "admin", "password": ""}, timeout=10
    ).json()["token"]
    answer = httpx.get(
        f"{master.url}/api/v1/webhooks/{webhook_id}/deliveries",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["deliveries"]
    return found


def settled(master: MasterProcess, webhook_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = deliveries(master, webhook_id)
        if found and found[0]["state"] != "PENDING":
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"webhook {webhook_id}: {deliveries(master, webhook_id)}")


def run_experiment(det: Det, tmp_path: Path) -> int:
    model = tmp_path / "model"
    model.mkdir()
    (model / "trial.py").write_text((WORKFLOWS / "trial.py").read_text(), encoding="utf-8")
    config = tmp_path / "hooks.yaml"
    config.write_text(
        "name: hooked\nentrypoint: python3 trial.py\n"
        "hyperparameters:\n  steps: 4\n  sleep: 0\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n"
        "max_restarts: 0\n"
        "integrations:\n  webhooks:\n    webhook_name: [alerts]\n",
        encoding="utf-8",
    )
    created = det.ok("experiment", "create", str(config), str(model)).stdout
    found = re.search(r"Created experiment (\d+)", created)
    assert found, created
    exp_id = int(found.group(1))
    deadline = time.monotonic() + WAIT_S
    state = ""
    while time.monotonic() < deadline:
        described = json.loads(det.ok("experiment", "describe", str(exp_id), "--json").stdout)
        state = described[0]["experiment"]["state"]
        if state in ("STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"):
            break
        time.sleep(0.3)
    assert state == "STATE_COMPLETED", state
    return exp_id


def test_webhooks_deliver_what_an_experiment_does(
    det: Det, agent: LocalCluster, hooks: Receiver, tmp_path: Path
) -> None:
    det.login("admin", "")
    done = create(
        det, **on_completed(hooks.url("done"), "done"), webhookType="WEBHOOK_TYPE_DEFAULT"
    )
    assert done["webhookType"] == "WEBHOOK_TYPE_DEFAULT"
    assert done["mode"] == "WEBHOOK_MODE_WORKSPACE"
    logged = create(
        det,
        name="step-three",
        url=hooks.url("log"),
        triggers=[{"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": r"STEP 3\b"}}],
    )
    assert logged["triggers"][0]["condition"] == {"regex": r"STEP 3\b"}
    hooks.plan("flaky", 500)
    flaky = create(det, **on_completed(hooks.url("flaky"), "flaky"))
    hooks.plan("hang", HANG, HANG, HANG)
    hanging = create(det, **on_completed(hooks.url("hang"), "hang"))
    alerts = create(
        det,
        name="alerts",
        url=hooks.url("alert"),
        mode="WEBHOOK_MODE_SPECIFIC",
        triggers=[{"triggerType": "TRIGGER_TYPE_CUSTOM", "condition": {}}],
    )
    code, listed = bindings(det, "list")
    assert code == 0
    assert {w["id"] for w in listed} == {
        done["id"],
        logged["id"],
        flaky["id"],
        hanging["id"],
        alerts["id"],
    }

    exp_id = run_experiment(det, tmp_path)  # completes while its hanging receiver hangs

    (post,) = hooks.wait("done")
    assert verify(KEY, post.headers, post.body)
    body = json.loads(post.body)
    assert body["event_type"] == "EXPERIMENT_STATE_CHANGE"
    assert body["condition"] == {"state": "COMPLETED"}
    experiment = body["event_data"]["experiment"]
    assert (experiment["id"], experiment["state"], experiment["name"]) == (
        exp_id,
        "COMPLETED",
        "hooked",
    )
    assert experiment["workspace"] == "Uncategorized"

    (post,) = hooks.wait("log")
    assert verify(KEY, post.headers, post.body)
    body = json.loads(post.body)
    assert body["event_type"] == "TASK_LOG"
    assert body["condition"] == {"regex": r"STEP 3\b"}
    task_log = body["event_data"]["task_log"]
    assert task_log["triggering_log"].strip() == "STEP 3"
    assert task_log["node_name"] == "hooks"

    # an alert, as core_context.alert() sends it, to the SPECIFIC webhook the config names
    listed_trials = det.ok("experiment", "list-trials", str(exp_id)).stdout
    found = re.search(r"^\s*(\d+) \|", listed_trials, re.MULTILINE)
    assert found, listed_trials
    trial_id = int(found.group(1))
    code, _ = bindings(det, "alert", str(exp_id), str(trial_id), "spike", "loss 9")
    assert code == 0
    (post,) = hooks.wait("alert")
    assert verify(KEY, post.headers, post.body)
    body = json.loads(post.body)
    assert body["event_type"] == "CUSTOM"
    assert body["event_data"]["custom_data"] == {
        "title": "spike",
        "description": "loss 9",
        "level": "WARNING",
    }
    assert body["event_data"]["experiment"]["trial_id"] == trial_id

    first, second = hooks.wait("flaky", 2)
    assert first.body == second.body  # the same event, retried
    assert verify(KEY, second.headers, second.body)
    assert settled(det.master, flaky["id"])["attempts"] == 2

    row = settled(det.master, hanging["id"])
    assert row["state"] == "FAILED"
    assert row["attempts"] == 3
    assert row["lastError"] == "timed out after 2 s"


def test_manage_test_and_refusals(det: Det, hooks: Receiver) -> None:
    det.login("admin", "")
    made = create(det, **on_completed(hooks.url("managed"), "managed"))
    code, result = bindings(det, "test", str(made["id"]))
    assert (code, result) == (0, {"completed": True})
    (post,) = hooks.wait("managed")
    assert verify(KEY, post.headers, post.body)
    assert json.loads(post.body)["event_data"] == {"data": "test"}

    code, _ = bindings(det, "patch", str(made["id"]), hooks.url("moved"))
    assert code == 0
    code, listed = bindings(det, "list")
    assert [w["url"] for w in listed if w["id"] == made["id"]] == [hooks.url("moved")]

    det.ok("user", "create", "plain", "--password", "Plain-user-pw1")
    plain = {"user": "plain", "password": "Plain-user-pw1"}
    code, refused = bindings(det, "create", json.dumps(on_completed(hooks.url("x"), "x")), **plain)
    assert code == 3
    assert "ForbiddenException" in refused
    assert "global webhooks" in refused
    ws_hook = {**on_completed(hooks.url("x"), "x"), "workspaceId": 1}
    code, refused = bindings(det, "create", json.dumps(ws_hook), **plain)
    assert code == 3
    assert "editor or admin" in refused
    code, refused = bindings(det, "delete", str(made["id"]), **plain)
    assert code == 3
    code, seen = bindings(det, "list", **plain)
    assert (code, seen) == (0, [])

    code, _ = bindings(det, "delete", str(made["id"]))
    assert code == 0
    code, listed = bindings(det, "list")
    assert made["id"] not in {w["id"] for w in listed}
    code, refused = bindings(det, "delete", str(made["id"]))
    assert code == 3
    assert "NotFoundException" in refused
