"""Checkpoint reports name their task in the body: a user needs change rights on that task
(issue 20: a user with no rights planted a checkpoint the trial then resumed from)."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from stalwart.master.db.tables import Experiment, Trial
from tests.master.test_allocations_api import make_trial
from tests.security.conftest import login, make_user, make_workspace, state_of


def _report(task_id: str, steps: int) -> dict[str, object]:
    return {
        "uuid": str(uuid.uuid4()),
        "taskId": task_id,
        "state": "STATE_COMPLETED",
        "resources": {"model.pt": 10},
        "metadata": {"steps_completed": steps},
    }


def _latest(client: TestClient, trial_id: int) -> str | None:
    with state_of(client).sessions() as session:
        trial = session.get(Trial, trial_id)
        assert trial is not None
        return trial.latest_checkpoint


def test_a_user_without_rights_cannot_plant_a_checkpoint(
    client: TestClient, admin: dict[str, str]
) -> None:
    env = make_trial(client, state_of(client), admin)
    make_user(client, admin, "mallory")
    mallory = login(client, "mallory")
    resp = client.post("/api/v1/checkpoints", json=_report(env.task_id, 99999), headers=mallory)
    assert resp.status_code == 403, resp.text
    assert "mallory" in resp.json()["message"]
    assert _latest(client, env.trial_id) is None


def test_a_user_with_no_role_in_the_workspace_is_refused(
    client: TestClient, admin: dict[str, str]
) -> None:
    env = make_trial(client, state_of(client), admin)
    with state_of(client).sessions() as session:  # the experiment moves to a private workspace
        experiment = session.get(Experiment, env.experiment_id)
        assert experiment is not None
        experiment.project_id = make_workspace(client, "private", default_role="none")
        session.commit()
    make_user(client, admin, "mallory")
    mallory = login(client, "mallory")
    resp = client.post("/api/v1/checkpoints", json=_report(env.task_id, 99999), headers=mallory)
    assert resp.status_code == 403, resp.text
    assert _latest(client, env.trial_id) is None


def test_the_owner_and_the_task_still_report(client: TestClient, admin: dict[str, str]) -> None:
    env = make_trial(client, state_of(client), admin)
    report = _report(env.task_id, 10)
    resp = client.post("/api/v1/checkpoints", json=report, headers=admin)
    assert resp.status_code == 200, resp.text
    assert _latest(client, env.trial_id) == report["uuid"]
    report = _report(env.task_id, 20)
    resp = client.post("/api/v1/checkpoints", json=report, headers=env.headers)
    assert resp.status_code == 200, resp.text
    assert _latest(client, env.trial_id) == report["uuid"]
