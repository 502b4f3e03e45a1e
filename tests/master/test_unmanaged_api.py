"""Unmanaged experiments and trials (the SDK's detached mode) on an in-process master: the
rules the official SDK does not exercise (refusals, idempotent puts, state roll-up, the
searcher leaving them alone). The SDK's own path is tests/compat/test_det_unmanaged.py."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from stalwart.master.cluster.search import drive
from stalwart.master.db.tables import Experiment
from stalwart.master.state import MasterState
from tests.master.test_experiments_api import new_experiment

CONFIG = "name: detached\nsearcher:\n  name: single\n  metric: unmanaged\n"


def _state(client: TestClient) -> MasterState:
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    return state


def _put(client: TestClient, admin: dict[str, str], external: str) -> dict[str, Any]:
    resp = client.put(
        f"/api/v1/experiments/by-external-id/{external}",
        json={"config": CONFIG, "unmanaged": True},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def test_an_external_id_names_one_experiment_and_trial(
    client: TestClient, admin: dict[str, str]
) -> None:
    first = _put(client, admin, "ext")["experiment"]
    assert first["state"] == "STATE_PAUSED"
    assert _put(client, admin, "ext")["experiment"]["id"] == first["id"]
    assert _put(client, admin, "other")["experiment"]["id"] != first["id"]
    body = {"createTrialRequest": {"experimentId": first["id"], "unmanaged": True}}
    trial = client.put("/api/v1/trials", json={**body, "externalTrialId": "t1"}, headers=admin)
    again = client.put("/api/v1/trials", json={**body, "externalTrialId": "t1"}, headers=admin)
    assert trial.status_code == again.status_code == 200, trial.text
    assert trial.json()["trial"]["id"] == again.json()["trial"]["id"]
    assert trial.json()["trial"]["taskId"] == f"{first['id']}.t1"
    found = client.get("/api/v1/trials/by-external-id/ext/t1", headers=admin)
    assert found.json()["trial"]["id"] == trial.json()["trial"]["id"]
    assert client.get("/api/v1/trials/by-external-id/ext/t2", headers=admin).status_code == 404


def test_trial_states_roll_up_to_the_experiment(client: TestClient, admin: dict[str, str]) -> None:
    exp = _put(client, admin, "roll")["experiment"]["id"]
    trial = client.post(
        "/api/v1/trials", json={"experimentId": exp, "unmanaged": True}, headers=admin
    ).json()["trial"]["id"]
    started = client.post(f"/api/v1/trials/{trial}/start", json={}, headers=admin)
    assert started.json() == {"trialRunId": 1, "stepsCompleted": 0, "latestCheckpoint": None}
    state = client.get(f"/api/v1/experiments/{exp}", headers=admin).json()["experiment"]["state"]
    assert state == "STATE_RUNNING"
    twice = client.post(f"/api/v1/trials/{trial}/start", json={}, headers=admin)
    assert twice.status_code == 400
    assert "already been started" in twice.text
    done = client.patch(f"/api/v1/trials/{trial}", json={"state": "STATE_COMPLETED"}, headers=admin)
    assert done.json()["trial"]["state"] == "STATE_COMPLETED"
    experiment = client.get(f"/api/v1/experiments/{exp}", headers=admin).json()["experiment"]
    assert experiment["state"] == "STATE_COMPLETED"
    resumed = client.post(f"/api/v1/trials/{trial}/start", json={"resume": True}, headers=admin)
    assert resumed.json()["trialRunId"] == 2
    state = client.get(f"/api/v1/experiments/{exp}", headers=admin).json()["experiment"]["state"]
    assert state == "STATE_RUNNING"
    bad = client.patch(f"/api/v1/trials/{trial}", json={"state": "STATE_BOGUS"}, headers=admin)
    assert bad.status_code == 400


def test_managed_experiments_refuse_trials_from_outside(
    client: TestClient, admin: dict[str, str]
) -> None:
    managed = new_experiment(client, admin, activate=False)
    resp = client.post(
        "/api/v1/trials", json={"experimentId": managed, "unmanaged": True}, headers=admin
    )
    assert resp.status_code == 400
    assert "only unmanaged experiments" in resp.json()["message"]
    not_unmanaged = client.put(
        "/api/v1/experiments/by-external-id/x", json={"config": CONFIG}, headers=admin
    )
    assert not_unmanaged.status_code == 400
    exp = _put(client, admin, "noact")["experiment"]["id"]
    refused = client.post(f"/api/v1/experiments/{exp}/activate", headers=admin)
    assert refused.status_code == 400
    assert "unmanaged" in refused.json()["message"]


def test_the_searcher_creates_no_trial_for_an_unmanaged_experiment(
    client: TestClient, admin: dict[str, str]
) -> None:
    exp = _put(client, admin, "quiet")["experiment"]["id"]
    state = _state(client)
    with state.sessions() as session:
        experiment = session.get(Experiment, exp)
        assert experiment is not None
        drive(session, experiment)
        session.commit()
    trials = client.get(f"/api/v1/experiments/{exp}/trials", headers=admin).json()["trials"]
    assert trials == []
