"""Resource pools bound to workspaces: the routes, their refusals, and the check where
experiments and interactive tasks are created."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete

from stalwart.master.app import create_app
from stalwart.master.db.tables import Project, Workspace
from tests.master.conftest import login, make_settings
from tests.master.test_allocations_api import CONFIG
from tests.security.conftest import make_user, make_workspace, state_of, workspace_of
from tests.security.test_permissions import create_in

PATH = "/api/v1/resource-pools/{}/workspace-bindings"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = make_settings(
        tmp_path / "home", resource_pools=[{"pool_name": "second"}, {"pool_name": "third"}]
    )
    with TestClient(create_app(settings, run_cluster=False)) as test_client:
        yield test_client


def _bound(client: TestClient, headers: dict[str, str], pool: str = "second") -> list[int]:
    resp = client.get(PATH.format(pool), headers=headers)
    assert resp.status_code == 200, resp.text
    ids: list[int] = resp.json()["workspaceIds"]
    return ids


def _change(
    client: TestClient, headers: dict[str, str], method: str, names: list[str], pool: str = "second"
) -> int:
    body = {"resourcePoolName": pool, "workspaceNames": names}
    status: int = client.request(method, PATH.format(pool), json=body, headers=headers).status_code
    return status


def test_bind_list_replace_remove(client: TestClient, admin: dict[str, str]) -> None:
    team = workspace_of(client, make_workspace(client, "team"))
    lab = workspace_of(client, make_workspace(client, "lab"))
    assert _bound(client, admin) == []
    assert _change(client, admin, "POST", ["team"]) == 200
    assert _change(client, admin, "POST", ["team", "lab"]) == 200  # adding twice: no-op
    assert _bound(client, admin) == [team, lab]
    assert _bound(client, admin, "third") == []
    assert _change(client, admin, "PUT", ["Uncategorized"]) == 200
    assert _bound(client, admin) == [1]
    by_id = {"resourcePoolName": "second", "workspaceIds": [lab]}
    assert client.post(PATH.format("second"), json=by_id, headers=admin).status_code == 200
    assert _change(client, admin, "DELETE", ["Uncategorized", "team"]) == 200
    assert _bound(client, admin) == [lab]
    with state_of(client).sessions() as session:  # a deleted workspace takes its bindings
        session.execute(delete(Project).where(Project.workspace_id == lab))
        session.execute(delete(Workspace).where(Workspace.id == lab))
        session.commit()
    assert _bound(client, admin) == []


def test_binding_refusals(client: TestClient, admin: dict[str, str]) -> None:
    make_workspace(client, "team")
    with state_of(client).sessions() as session:
        session.add(Workspace(name="old", archived=True))
        session.commit()
    cases = [
        ("default", ["team"], 400, "is a default pool"),
        ("nowhere", ["team"], 404, "resource pool 'nowhere' not found"),
        ("second", ["atlantis"], 404, "workspace 'atlantis' not found"),
        ("second", [], 400, "name at least one workspace"),
        ("second", ["old"], 400, "archived workspace 'old'"),
    ]
    for pool, names, status, message in cases:
        resp = client.post(
            PATH.format(pool),
            json={"resourcePoolName": pool, "workspaceNames": names},
            headers=admin,
        )
        assert resp.status_code == status, resp.text
        assert message in resp.json()["message"]
    assert client.get(PATH.format("nowhere"), headers=admin).status_code == 404
    make_user(client, admin, "carol")
    carol = login(client, "carol")
    for method in ("POST", "PUT", "DELETE"):
        assert _change(client, carol, method, ["team"]) == 403
    assert _bound(client, admin) == []


def test_bound_workspaces_hidden_from_those_who_cannot_see_them(
    client: TestClient, admin: dict[str, str]
) -> None:
    secret = workspace_of(client, make_workspace(client, "secret", default_role="none"))
    assert _change(client, admin, "PUT", ["secret", "Uncategorized"]) == 200
    assert _bound(client, admin) == [1, secret]
    make_user(client, admin, "carol")
    assert _bound(client, login(client, "carol")) == [1]


def _experiment_config(pool: str) -> str:
    return CONFIG + f"resources:\n  resource_pool: {pool}\n"


def test_experiments_and_tasks_use_only_pools_that_serve_their_workspace(
    client: TestClient, admin: dict[str, str]
) -> None:
    team_project = make_workspace(client, "team")
    assert _change(client, admin, "POST", ["team"]) == 200
    body = {"activate": False, "config": _experiment_config("second"), "modelDefinition": []}
    refused = client.post("/api/v1/experiments", json=body, headers=admin)
    assert refused.status_code == 400, refused.text
    assert refused.json()["message"] == (
        "resource pool 'second' is bound to workspace 'team' and serves only their experiments "
        "and tasks; this experiment is in workspace 'Uncategorized' (use another resource pool, "
        "or ask a cluster admin to bind 'second' to 'Uncategorized')"
    )
    in_team = client.post(
        "/api/v1/experiments", json=body | {"projectId": team_project}, headers=admin
    )
    assert in_team.status_code == 200, in_team.text
    other = body | {"config": _experiment_config("third")}
    assert client.post("/api/v1/experiments", json=other, headers=admin).status_code == 200
    assert create_in(client, admin, 1) is not None  # the default pool serves everyone

    command = {"config": {"resources": {"resource_pool": "second"}, "entrypoint": ["true"]}}
    refused_cmd = client.post("/api/v1/commands", json=command, headers=admin)
    assert refused_cmd.status_code == 400, refused_cmd.text
    assert "this command is in workspace 'Uncategorized'" in refused_cmd.json()["message"]
    team = workspace_of(client, team_project)
    ok = client.post("/api/v1/commands", json=command | {"workspaceId": team}, headers=admin)
    assert ok.status_code == 200, ok.text


def test_unbound_pools(client: TestClient, admin: dict[str, str]) -> None:
    def unbound() -> list[str]:
        resp = client.get("/api/v1/resource-pools", params={"unbound": True}, headers=admin)
        return [p["name"] for p in resp.json()["resourcePools"]]

    assert unbound() == ["default", "second", "third"]
    _change(client, admin, "POST", ["Uncategorized"], pool="third")
    assert unbound() == ["default", "second"]
