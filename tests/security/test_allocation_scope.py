"""An allocation token reaches only its own allocation: its trial's metrics, checkpoints and
logs, its allocation's signals and all-gather, its task's context; never another trial's, and
never the user APIs."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stalwart.master.db.tables import Allocation, utcnow
from tests.master.test_allocations_api import (
    TrialEnv,
    add_trial,
    create_experiment,
    task_headers,
)
from tests.security.conftest import state_of


@dataclass
class Pair:
    """A task's own trial, a sibling trial of the same experiment, and another experiment's."""

    own: TrialEnv
    sibling: TrialEnv
    stranger: TrialEnv


@pytest.fixture
def pair(client: TestClient, admin: dict[str, str]) -> Pair:
    state = state_of(client)
    experiment = create_experiment(client, admin)
    own = add_trial(state, experiment)
    sibling = add_trial(state, experiment)
    stranger = add_trial(state, create_experiment(client, admin))
    return Pair(own, sibling, stranger)


def _metrics(env: TrialEnv, steps: int = 1) -> dict[str, Any]:
    return {
        "group": "training",
        "metrics": {
            "trialId": env.trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "metrics": {"avgMetrics": {"loss": 1.0}},
        },
    }


def _checkpoint(env: TrialEnv, uuid: str) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "state": "STATE_COMPLETED",
        "metadata": {"steps_completed": 1},
        "resources": {"a": "1"},
        "taskId": env.task_id,
        "allocationId": env.allocation_id,
    }


def _log(env: TrialEnv) -> dict[str, Any]:
    line = {"log": "hi\n", "task_id": env.task_id, "allocation_id": env.allocation_id}
    return {"logs": [{**line, "timestamp": "2025-01-01T00:00:00Z", "source": "task"}]}


def _call(client: TestClient, env: TrialEnv, method: str, path: str, body: Any = None) -> int:
    resp = client.request(method, path, json=body, headers=task_headers(env.token))
    if resp.status_code == 403:
        assert "allocation" in resp.json()["message"] or "cannot" in resp.json()["message"]
    status: int = resp.status_code
    return status


def _own_calls(env: TrialEnv) -> list[tuple[str, str, Any]]:
    return [
        ("GET", "/api/v1/me", None),
        ("POST", f"/api/v1/trials/{env.trial_id}/metrics", _metrics(env)),
        ("POST", f"/api/v1/trials/{env.trial_id}/progress", {"progress": 0.5, "is_raw": True}),
        ("GET", f"/api/v1/trials/{env.trial_id}", None),
        ("POST", f"/api/v1/trials/{env.trial_id}/runner/metadata", {"state": "training"}),
        ("POST", f"/api/v1/runs/{env.trial_id}/metadata", {"metadata": {"a": 1}}),
        ("POST", "/api/v1/checkpoints", _checkpoint(env, f"own-{env.trial_id}")),
        ("GET", f"/api/v1/checkpoints/own-{env.trial_id}", None),
        ("POST", "/api/v1/task/logs", _log(env)),
        ("POST", "/api/v1/runs/start", {"runId": env.trial_id, "checkpointStorage": None}),
        (
            "GET",
            f"/api/v1/allocations/{env.allocation_id}/signals/preemption?timeout_seconds=0",
            None,
        ),
        ("GET", f"/api/v1/tasks/{env.task_id}/context_directory", None),
    ]


def test_a_task_reaches_its_own_allocation(client: TestClient, pair: Pair) -> None:
    for method, path, body in _own_calls(pair.own):
        assert _call(client, pair.own, method, path, body) == 200, (method, path)
    batch = {"reports": [_metrics(pair.own, 2)]}
    resp = client.post(
        "/api/v1/trials/metrics/batch",
        content=json.dumps(batch),
        headers=task_headers(pair.own.token),
    )
    assert resp.status_code == 200, resp.text


@pytest.mark.parametrize("whose", ["sibling", "stranger"])
def test_a_task_never_reaches_another_trial(
    client: TestClient, admin: dict[str, str], pair: Pair, whose: str
) -> None:
    other: TrialEnv = getattr(pair, whose)
    # the other trial's checkpoint, reported by its own task
    assert _call(client, other, "POST", "/api/v1/checkpoints", _checkpoint(other, "theirs")) == 200
    for method, path, body in _own_calls(other):
        if path == "/api/v1/me" or path.startswith("/api/v1/checkpoints/"):
            continue  # the other trial's checkpoint is "theirs", below
        if path == "/api/v1/checkpoints":
            body = _checkpoint(other, "forged")
        assert _call(client, pair.own, method, path, body) == 403, (method, path)
    assert _call(client, pair.own, "GET", "/api/v1/checkpoints/theirs") == 403
    batch = {"reports": [_metrics(pair.own, 3), _metrics(other, 3)]}
    resp = client.post(
        "/api/v1/trials/metrics/batch",
        content=json.dumps(batch),
        headers=task_headers(pair.own.token),
    )
    assert resp.status_code == 403
    start = {"runId": other.trial_id, "checkpointStorage": {"type": "shared_fs"}}
    assert _call(client, pair.own, "POST", "/api/v1/runs/start", start) == 403
    all_gather = f"/api/v1/allocations/{other.allocation_id}/all_gather"
    assert _call(client, pair.own, "POST", all_gather, {"data": {}}) == 403
    experiment = f"/api/v1/experiments/{other.experiment_id}"
    if other.experiment_id != pair.own.experiment_id:
        best = f"{experiment}/searcher/best_searcher_validation_metric"
        assert _call(client, pair.own, "GET", best) == 403


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/v1/users", None),
        ("PATCH", "/api/v1/users/1", {"displayName": "x"}),
        ("POST", "/api/v1/users", {"user": {"username": "x"}}),
        ("DELETE", "/api/v1/users/1/sessions", None),
        ("GET", "/api/v1/experiments", None),
        ("GET", "/api/v1/experiments/{exp}", None),
        ("POST", "/api/v1/experiments/{exp}/kill", None),
        ("PATCH", "/api/v1/experiments/{exp}", {"name": "x"}),
        ("POST", "/api/v1/trials/{trial}/kill", None),
        ("GET", "/api/v1/trials/{trial}/logs", None),
        ("GET", "/api/v1/trials/{trial}/checkpoints", None),
        ("GET", "/api/v1/tasks", None),
        ("GET", "/api/v1/agents", None),
        ("GET", "/api/v1/agents/tokens", None),
        ("DELETE", "/api/v1/agents/a1/token", None),
        ("GET", "/api/v1/master/config", None),
        ("GET", "/api/v1/master/logs", None),
        ("GET", "/api/v1/workspaces/1/roles", None),
        ("PUT", "/api/v1/workspaces/1/roles/users/1", {"role": "viewer"}),
        ("POST", "/api/v1/auth/logout", None),
    ],
)
def test_a_task_never_reaches_the_user_apis(
    client: TestClient, pair: Pair, method: str, path: str, body: Any
) -> None:
    """Not even on its own experiment and trial: a task acts only through the task routes."""
    own = pair.own
    concrete = path.format(exp=own.experiment_id, trial=own.trial_id)
    resp = client.request(method, concrete, json=body, headers=task_headers(own.token))
    assert resp.status_code == 403, resp.text
    assert "a task's token reaches only" in resp.json()["message"]


def test_a_token_stops_working_once_its_allocation_has_ended(
    client: TestClient, pair: Pair
) -> None:
    """Calls in flight at the end still land (a two-minute grace); a leaked token of a run that
    ended is refused with the reason, while the other runs' tokens keep working."""
    own = pair.own
    state = state_of(client)
    path = f"/api/v1/allocations/{own.allocation_id}/signals/preemption"

    def end(ago: dt.timedelta) -> None:
        with state.sessions() as session:
            allocation = session.get(Allocation, own.allocation_id)
            assert allocation is not None
            allocation.state = "TERMINATED"
            allocation.end_time = utcnow() - ago
            session.commit()

    end(dt.timedelta(seconds=5))
    assert client.get(path, headers=task_headers(own.token)).status_code == 200
    end(dt.timedelta(minutes=5))
    refused = client.get(path, headers=task_headers(own.token))
    assert refused.status_code == 401, refused.text
    assert f"allocation {own.allocation_id} ended" in refused.json()["message"]
    sibling = f"/api/v1/allocations/{pair.sibling.allocation_id}/signals/preemption"
    assert client.get(sibling, headers=task_headers(pair.sibling.token)).status_code == 200
