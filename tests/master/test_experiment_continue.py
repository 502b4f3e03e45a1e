"""``POST /api/v1/experiments/continue``: what may be continued, by whom, with which changes
(rules: :mod:`stalwart.master.services.experiment_continue`; the run itself is tested with the
cluster loop in ``tests/master/cluster/test_continue.py``)."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from stalwart.master.db.tables import WorkspaceRole
from tests.master.test_allocations_api import CONFIG
from tests.master.test_experiments_api import complete
from tests.security.conftest import login, make_user, make_workspace, state_of, workspace_of
from tests.security.test_permissions import create_in

RANDOM = CONFIG.replace("name: single", "name: random\n  max_trials: 2")


def _continue(
    client: TestClient, headers: dict[str, str], exp_id: int, override: str
) -> httpx.Response:
    resp: httpx.Response = client.post(
        "/api/v1/experiments/continue",
        json={"id": exp_id, "overrideConfig": override},
        headers=headers,
    )
    return resp


def _finished(client: TestClient, headers: dict[str, str], project: int = 1) -> int:
    exp_id = create_in(client, headers, project)
    assert exp_id is not None
    complete(client, exp_id)
    return exp_id


def test_a_finished_single_trial_experiment_continues(
    client: TestClient, admin: dict[str, str]
) -> None:
    exp_id = _finished(client, admin)
    resp = client.post(
        "/api/v1/experiments/continue",
        json={"id": exp_id, "overrideConfig": "searcher:\n  max_length:\n    batches: 5\n"},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["experiment"]["id"] == exp_id
    assert body["experiment"]["state"] in ("STATE_ACTIVE", "STATE_QUEUED")
    assert body["experiment"]["endTime"] is None
    config = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["config"]
    assert config["searcher"]["max_length"] == {"batches": 5}
    assert config["searcher"]["metric"] == "loss"  # merged, not replaced


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("hyperparameters:\n  lr: 0.5\n", "cannot change 'hyperparameters'"),
        ("project: other\n", "use `det experiment move`"),
        ("workspace: other\n", "use `det experiment move`"),
        (
            "searcher:\n  name: random\n  metric: loss\n  max_trials: 3\n",
            "must keep the single searcher",
        ),
        ("max_restarts: many\n", "invalid experiment configuration: "),
        ("- a list\n", "must be a mapping"),
    ],
)
def test_overrides_that_cannot_apply_are_refused(
    client: TestClient, admin: dict[str, str], override: str, message: str
) -> None:
    exp_id = _finished(client, admin)
    resp = _continue(client, admin, exp_id, override)
    assert resp.status_code == 400, resp.text
    assert message in resp.json()["message"]
    state = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["experiment"]
    assert state["state"] == "STATE_COMPLETED"  # nothing was written


def test_only_finished_single_trial_experiments_continue(
    client: TestClient, admin: dict[str, str]
) -> None:
    active = create_in(client, admin, 1)
    assert active is not None
    resp = _continue(client, admin, active, "")
    assert resp.status_code == 400
    assert "is in state STATE_ACTIVE: only a finished" in resp.json()["message"]

    files = [{"path": "train.py", "type": 48, "content": "", "mode": 33188, "mtime": "0"}]
    made = client.post(
        "/api/v1/experiments",
        json={"activate": True, "config": RANDOM, "modelDefinition": files},
        headers=admin,
    )
    assert made.status_code == 200, made.text
    search = made.json()["experiment"]["id"]
    complete(client, search)
    resp = _continue(client, admin, search, "")
    assert resp.status_code == 400
    assert "is a random search: only a single-trial experiment" in resp.json()["message"]

    assert _continue(client, admin, 999, "").status_code == 404

    archived = _finished(client, admin)
    client.post(f"/api/v1/experiments/{archived}/archive", headers=admin)
    resp = _continue(client, admin, archived, "")
    assert resp.status_code == 400
    assert "archived" in resp.json()["message"]


def test_who_may_continue_and_what_they_may_change(
    client: TestClient, admin: dict[str, str]
) -> None:
    project = make_workspace(client, "team", default_role="none")
    team = workspace_of(client, project)
    roles = {"mia": "member", "mike": "member", "vera": "viewer", "eddie": "editor"}
    ids = {name: make_user(client, admin, name) for name in roles}
    with state_of(client).sessions() as session:
        for name, role in roles.items():
            session.add(WorkspaceRole(workspace_id=team, user_id=ids[name], role=role))
        session.commit()
    headers = {name: login(client, name) for name in roles}
    exp_id = _finished(client, headers["mia"], project)

    assert _continue(client, headers["vera"], exp_id, "").status_code == 403
    assert _continue(client, headers["mike"], exp_id, "").status_code == 403
    owner_only = _continue(client, headers["eddie"], exp_id, "entrypoint: python3 other.py\n")
    assert owner_only.status_code == 403
    message = owner_only.json()["message"]
    assert "runs as its owner mia, so only they may change entrypoint" in message
    allowed = "searcher:\n  max_length:\n    batches: 9\nmax_restarts: 2\nname: longer\n"
    resp = _continue(client, headers["eddie"], exp_id, allowed)
    assert resp.status_code == 200, resp.text
    assert resp.json()["experiment"]["name"] == "longer"

    complete(client, exp_id)
    resp = _continue(client, headers["mia"], exp_id, "entrypoint: python3 other.py\n")
    assert resp.status_code == 200, resp.text
