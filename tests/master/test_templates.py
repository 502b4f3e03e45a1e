"""Config templates over HTTP: the routes, the workspace roles, and ``--template`` on experiments
and interactive tasks (rules: :mod:`stalwart.master.services.templates`)."""

from __future__ import annotations

import base64
from typing import Any

from fastapi.testclient import TestClient

from stalwart.master.db.tables import WorkspaceRole
from tests.master.test_allocations_api import CONFIG
from tests.security.conftest import login, make_user, make_workspace, state_of, workspace_of

TEMPLATE = {
    "description": "from the template",
    "max_restarts": 7,
    "labels": ["tpl"],
    "resources": {"slots_per_trial": 1},
}


def _files() -> list[dict[str, Any]]:
    return [
        {
            "path": "train.py",
            "type": 48,
            "content": base64.b64encode(b"print('hi')\n").decode(),
            "mode": 0o100644,
            "mtime": "1700000000",
            "uid": 0,
            "gid": 0,
        }
    ]


def _role(client: TestClient, workspace_id: int, user_id: int, role: str) -> None:
    with state_of(client).sessions() as session:
        session.add(WorkspaceRole(workspace_id=workspace_id, user_id=user_id, role=role))
        session.commit()


def _post(client: TestClient, headers: dict[str, str], name: str, config: Any, ws: int = 0) -> Any:
    return client.post(
        f"/api/v1/templates/{name}",
        json={"name": name, "config": config, "workspaceId": ws},
        headers=headers,
    )


def test_crud_with_determined_shapes(client: TestClient, admin: dict[str, str]) -> None:
    made = _post(client, admin, "base", TEMPLATE)
    assert made.status_code == 200, made.text
    assert made.json() == {"template": {"name": "base", "config": TEMPLATE, "workspaceId": 1}}
    assert _post(client, admin, "base", TEMPLATE).status_code == 409

    got = client.get("/api/v1/templates/base", headers=admin).json()
    assert got["template"]["config"] == TEMPLATE

    patched = client.patch("/api/v1/templates/base", json={"max_restarts": 2}, headers=admin)
    assert patched.status_code == 200, patched.text
    assert patched.json()["template"]["config"] == {"max_restarts": 2}

    _post(client, admin, "other", {"debug": True})
    listed = client.get("/api/v1/templates", headers=admin).json()
    assert [t["name"] for t in listed["templates"]] == ["base", "other"]
    assert listed["pagination"]["total"] == 2
    assert listed["pagination"]["endIndex"] == 2
    only = client.get("/api/v1/templates", params={"name": "OTH"}, headers=admin).json()
    assert [t["name"] for t in only["templates"]] == ["other"]

    upsert = client.put(
        "/api/v1/templates/third", json={"name": "third", "config": {"a": 1}}, headers=admin
    )
    assert upsert.status_code == 200, upsert.text
    refused = client.put(
        "/api/v1/templates/third",
        json={"name": "third", "config": {"a": 1}, "workspaceId": 3},
        headers=admin,
    )
    assert refused.status_code == 400
    assert "workspace_id is not supported" in refused.json()["message"]

    renamed = client.patch(
        "/api/v1/template/rename", json={"oldName": "third", "newName": "fourth"}, headers=admin
    )
    assert renamed.json()["template"]["name"] == "fourth"
    assert client.get("/api/v1/templates/third", headers=admin).status_code == 404

    assert client.delete("/api/v1/templates/fourth", headers=admin).json() == {}
    gone = client.get("/api/v1/templates/fourth", headers=admin)
    assert gone.status_code == 404
    assert gone.json()["message"].startswith("template 'fourth' not found")
    assert client.delete("/api/v1/templates/fourth", headers=admin).status_code == 404


def test_a_template_config_must_be_a_mapping(client: TestClient, admin: dict[str, str]) -> None:
    resp = _post(client, admin, "bad", ["a", "list"])
    assert resp.status_code == 400
    assert "must be a mapping" in resp.json()["message"]
    _post(client, admin, "good", {"a": 1})
    assert client.patch("/api/v1/templates/good", json=[1], headers=admin).status_code == 400


def test_workspace_roles_decide_who_reads_and_writes(
    client: TestClient, admin: dict[str, str]
) -> None:
    project = make_workspace(client, "team", default_role="none")
    team = workspace_of(client, project)
    ids = {name: make_user(client, admin, name) for name in ("vera", "mia", "eddie", "bob")}
    _role(client, team, ids["vera"], "viewer")
    _role(client, team, ids["mia"], "member")
    _role(client, team, ids["eddie"], "editor")
    headers = {name: login(client, name) for name in ids}

    assert _post(client, headers["eddie"], "team-tpl", {"a": 1}, team).status_code == 200
    for reader in ("vera", "mia", "eddie"):
        assert client.get("/api/v1/templates/team-tpl", headers=headers[reader]).status_code == 200
    # bob has no role in the team workspace: the template does not exist for him
    assert client.get("/api/v1/templates/team-tpl", headers=headers["bob"]).status_code == 404
    listed = client.get("/api/v1/templates", headers=headers["bob"]).json()["templates"]
    assert listed == []
    assert _post(client, headers["bob"], "x", {"a": 1}, team).status_code == 404

    for writer in ("vera", "mia"):
        denied = _post(client, headers[writer], f"{writer}-tpl", {"a": 1}, team)
        assert denied.status_code == 403, denied.text
        assert "needs an editor role" in denied.json()["message"]
        patched = client.patch("/api/v1/templates/team-tpl", json={}, headers=headers[writer])
        assert patched.status_code == 403
        deleted = client.delete("/api/v1/templates/team-tpl", headers=headers[writer])
        assert deleted.status_code == 403
    assert client.delete("/api/v1/templates/team-tpl", headers=headers["eddie"]).status_code == 200


def test_experiments_merge_the_template_under_their_config(
    client: TestClient, admin: dict[str, str]
) -> None:
    _post(client, admin, "base", TEMPLATE)
    body = {
        "activate": False,
        "config": CONFIG + "labels: [mine]\n",
        "modelDefinition": _files(),
        "template": "base",
    }
    resp = client.post("/api/v1/experiments", json=body, headers=admin)
    assert resp.status_code == 200, resp.text
    config = resp.json()["config"]
    assert config["max_restarts"] == 7  # from the template
    assert config["description"] == "from the template"
    assert config["labels"] == ["mine"]  # the experiment's own value wins
    assert config["searcher"]["name"] == "single"

    unknown = client.post("/api/v1/experiments", json=body | {"template": "nope"}, headers=admin)
    assert unknown.status_code == 404
    assert "template 'nope' not found" in unknown.json()["message"]

    _post(client, admin, "broken", {"max_restarts": "many"})
    invalid = client.post("/api/v1/experiments", json=body | {"template": "broken"}, headers=admin)
    assert invalid.status_code == 400
    assert "max_restarts" in invalid.json()["message"]


def test_tasks_take_what_a_task_config_has_from_the_template(
    client: TestClient, admin: dict[str, str]
) -> None:
    template = {
        "description": "templated",
        "resources": {"slots": 0, "slots_per_trial": 4},
        "environment": {"environment_variables": ["FROM_TEMPLATE=1"]},
        "searcher": {"name": "single", "metric": "loss"},
    }
    _post(client, admin, "shared", template)
    resp = client.post(
        "/api/v1/commands",
        json={
            "config": {"entrypoint": ["true"], "environment": {"environment_variables": ["A=2"]}},
            "template_name": "shared",
            "preview": True,
        },
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    config = resp.json()["config"]
    assert config["description"] == "templated"
    assert config["resources"]["slots"] == 0
    assert "FROM_TEMPLATE=1" in config["environment"]["environment_variables"]["cpu"]
    assert "A=2" in config["environment"]["environment_variables"]["cpu"]

    unknown = client.post(
        "/api/v1/notebooks", json={"config": {}, "templateName": "nope"}, headers=admin
    )
    assert unknown.status_code == 404
    assert "template 'nope' not found" in unknown.json()["message"]
