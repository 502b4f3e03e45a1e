"""Workspaces and projects through the master's routes (in-process, SQLite): who may create,
see, change and delete them, their settings as experiments and tasks use them, and moving
experiments between projects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stalwart.master.db.tables import Project, Workspace
from stalwart.master.services.task_spec import run_as_of
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState
from tests.master.conftest import login, make_settings
from tests.master.test_experiment_create import file_entry

CONFIG = """\
name: {name}
entrypoint: python3 train.py
searcher:
  name: single
  metric: loss
resources:
  slots_per_trial: {slots}
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> MasterSettings:
    """Both databases: names compare without case and keys are unique on each."""
    db = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    return make_settings(tmp_path / "home", db=db)


def _state(client: TestClient) -> MasterState:
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    return state


def _user(client: TestClient, admin: dict[str, str], name: str) -> dict[str, str]:
    resp = client.post(
        "/api/v1/users",
        json={"user": {"username": name, "admin": False, "active": True}},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    return login(client, name)


def _workspace(client: TestClient, headers: dict[str, str], name: str, **extra: Any) -> Any:
    resp = client.post("/api/v1/workspaces", json={"name": name, **extra}, headers=headers)
    assert resp.status_code == 200, resp.text
    return resp.json()["workspace"]


def _project(client: TestClient, headers: dict[str, str], ws: int, name: str, **extra: Any) -> Any:
    resp = client.post(
        f"/api/v1/workspaces/{ws}/projects",
        json={"name": name, "workspaceId": ws, **extra},
        headers=headers,
    )
    assert resp.status_code == 200, resp.text
    return resp.json()["project"]


def _experiment(
    client: TestClient, headers: dict[str, str], project: int, *, slots: int = 1
) -> Any:
    resp = client.post(
        "/api/v1/experiments",
        json={
            "activate": False,
            "config": CONFIG.format(name="e", slots=slots),
            "modelDefinition": [file_entry("train.py", b"print('hi')\n")],
            "projectId": project,
        },
        headers=headers,
    )
    assert resp.status_code == 200, resp.text
    return resp.json()["experiment"]


def test_a_workspace_is_created_administered_and_pinned_by_its_creator(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice = _user(client, admin, "alice")
    ws = _workspace(client, alice, "team")
    assert (ws["username"], ws["pinned"], ws["numProjects"]) == ("alice", True, 0)
    roles = client.get(f"/api/v1/workspaces/{ws['id']}/roles", headers=alice).json()
    assert {a["username"]: a["role"] for a in roles["assignments"]} == {"alice": "admin"}
    # pins are the caller's own
    assert (
        client.get(f"/api/v1/workspaces/{ws['id']}", headers=admin).json()["workspace"]["pinned"]
        is False
    )
    client.post(f"/api/v1/workspaces/{ws['id']}/pin", headers=admin)
    pinned = client.get("/api/v1/workspaces?pinned=true", headers=admin).json()["workspaces"]
    assert [w["name"] for w in pinned] == ["team"]
    client.post(f"/api/v1/workspaces/{ws['id']}/unpin", headers=alice)
    assert client.get("/api/v1/workspaces?pinned=true", headers=alice).json()["workspaces"] == []
    dup = client.post("/api/v1/workspaces", json={"name": "TEAM"}, headers=admin)
    assert dup.status_code == 409, dup.text
    # a name SQLite's lower() does not fold (found by the API fuzz test: it answered 500)
    _workspace(client, admin, "Équipe")
    again = client.post("/api/v1/workspaces", json={"name": "Équipe"}, headers=admin)
    assert again.status_code == 409, again.text


def test_only_admins_change_a_workspace_and_only_cluster_admins_its_agent_user(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice = _user(client, admin, "alice")
    bob = _user(client, admin, "bob")
    ws = _workspace(client, alice, "team")["id"]
    refused = client.patch(f"/api/v1/workspaces/{ws}", json={"name": "x"}, headers=bob)
    assert refused.status_code == 403, refused.text
    renamed = client.patch(
        f"/api/v1/workspaces/{ws}",
        json={"name": "renamed", "defaultComputeResourcePool": "gpus", "defaultAuxPool": "cpus"},
        headers=alice,
    )
    assert renamed.status_code == 200, renamed.text
    body = renamed.json()["workspace"]
    assert (body["name"], body["defaultComputePool"], body["defaultAuxPool"]) == (
        "renamed",
        "gpus",
        "cpus",
    )
    group = {"agentUid": 4242, "agentGid": 4242, "agentUser": "bob", "agentGroup": "bob"}
    not_admin = client.patch(
        f"/api/v1/workspaces/{ws}", json={"agentUserGroup": group}, headers=alice
    )
    assert not_admin.status_code == 403
    assert "cluster admin" in not_admin.json()["message"]
    half = client.patch(
        f"/api/v1/workspaces/{ws}", json={"agentUserGroup": {"agentUid": 1}}, headers=admin
    )
    assert half.status_code == 400
    done = client.patch(f"/api/v1/workspaces/{ws}", json={"agentUserGroup": group}, headers=admin)
    assert done.json()["workspace"]["agentUserGroup"] == group
    builtin = client.patch("/api/v1/workspaces/1", json={"name": "x"}, headers=admin)
    assert builtin.status_code == 400
    for action in ("archive", "unarchive"):
        assert client.post(f"/api/v1/workspaces/{ws}/{action}", headers=bob).status_code == 403
        assert client.post(f"/api/v1/workspaces/{ws}/{action}", headers=alice).status_code == 200


def test_a_user_without_a_role_sees_neither_the_workspace_nor_its_projects(
    client: TestClient, admin: dict[str, str]
) -> None:
    _user(client, admin, "outsider")
    outsider = login(client, "outsider")
    ws = _workspace(client, admin, "secret")["id"]
    project = _project(client, admin, ws, "hidden")
    client.put(f"/api/v1/workspaces/{ws}/roles/default", json={"role": "none"}, headers=admin)
    names = [
        w["name"] for w in client.get("/api/v1/workspaces", headers=outsider).json()["workspaces"]
    ]
    assert "secret" not in names
    assert client.get(f"/api/v1/projects/{project['id']}", headers=outsider).status_code == 404
    assert client.get(f"/api/v1/projects/key/{project['key']}", headers=outsider).status_code == (
        404
    )
    listed = client.get(f"/api/v1/workspaces/{ws}/projects", headers=outsider)
    assert listed.status_code == 404
    assert client.get("/api/v1/workspaces/0/projects", headers=outsider).json()["projects"] == [
        p
        for p in client.get("/api/v1/workspaces/0/projects", headers=outsider).json()["projects"]
        if p["workspaceId"] != ws
    ]
    made = client.post(f"/api/v1/workspaces/{ws}/projects", json={"name": "mine"}, headers=outsider)
    assert made.status_code == 404


def test_projects_keys_notes_archive_and_delete(client: TestClient, admin: dict[str, str]) -> None:
    ws = _workspace(client, admin, "team")["id"]
    made = _project(client, admin, ws, "Vision models", description="d")
    assert made["key"].startswith("VIS")
    assert len(made["key"]) == 5
    keyed = _project(client, admin, ws, "nlp", key="nlp1")
    assert keyed["key"] == "NLP1"
    taken = client.post(
        f"/api/v1/workspaces/{ws}/projects", json={"name": "other", "key": "NLP1"}, headers=admin
    )
    assert taken.status_code == 409
    bad = client.post(
        f"/api/v1/workspaces/{ws}/projects", json={"name": "o", "key": "TOOLONG"}, headers=admin
    )
    assert bad.status_code == 400
    assert (
        client.post("/api/v1/workspaces/1/projects", json={"name": "x"}, headers=admin).status_code
        == 400
    )
    pid = made["id"]
    patched = client.patch(
        f"/api/v1/projects/{pid}", json={"name": "vision", "key": "vis"}, headers=admin
    ).json()["project"]
    assert (patched["name"], patched["key"]) == ("vision", "VIS")
    by_key = client.get("/api/v1/projects/key/vis", headers=admin).json()["project"]
    assert by_key["id"] == pid
    notes = [{"name": "a", "contents": "one"}]
    put = client.put(f"/api/v1/projects/{pid}/notes", json={"notes": notes, "projectId": pid})
    assert put.status_code == 401
    put = client.put(
        f"/api/v1/projects/{pid}/notes", json={"notes": notes, "projectId": pid}, headers=admin
    )
    assert put.json()["notes"] == notes
    added = client.post(
        f"/api/v1/projects/{pid}/notes", json={"name": "b", "contents": "two"}, headers=admin
    )
    assert [n["name"] for n in added.json()["notes"]] == ["a", "b"]
    assert client.post(f"/api/v1/projects/{pid}/archive", headers=admin).status_code == 200
    assert client.get(f"/api/v1/projects/{pid}", headers=admin).json()["project"]["archived"]
    stuck = client.post(
        "/api/v1/experiments",
        json={
            "activate": False,
            "config": CONFIG.format(name="e", slots=1),
            "modelDefinition": [],
            "projectId": pid,
        },
        headers=admin,
    )
    assert stuck.status_code == 400
    assert "archived" in stuck.json()["message"]
    assert client.post(f"/api/v1/projects/{pid}/unarchive", headers=admin).status_code == 200
    _experiment(client, admin, pid)
    refused = client.delete(f"/api/v1/projects/{pid}", headers=admin)
    assert refused.status_code == 400
    assert "holds 1 experiment" in refused.json()["message"]
    assert client.delete(f"/api/v1/projects/{keyed['id']}", headers=admin).json() == {
        "completed": True
    }
    assert client.delete("/api/v1/projects/1", headers=admin).status_code == 400


def test_a_workspace_with_experiments_is_not_deleted(
    client: TestClient, admin: dict[str, str]
) -> None:
    ws = _workspace(client, admin, "team")["id"]
    pid = _project(client, admin, ws, "p")["id"]
    exp = _experiment(client, admin, pid)
    refused = client.delete(f"/api/v1/workspaces/{ws}", headers=admin)
    assert refused.status_code == 400
    assert "holds 1 experiment" in refused.json()["message"]
    moved = client.post(
        f"/api/v1/experiments/{exp['id']}/move",
        json={"destinationProjectId": 1, "experimentId": exp["id"]},
        headers=admin,
    )
    assert moved.status_code == 200, moved.text
    assert client.delete(f"/api/v1/workspaces/{ws}", headers=admin).json() == {"completed": True}
    assert client.get(f"/api/v1/workspaces/{ws}", headers=admin).status_code == 404
    with _state(client).sessions() as session:
        assert session.get(Project, pid) is None
    assert client.delete("/api/v1/workspaces/1", headers=admin).status_code == 400


def test_a_workspace_with_models_is_not_deleted(client: TestClient, admin: dict[str, str]) -> None:
    ws = _workspace(client, admin, "registry")["id"]
    made = client.post("/api/v1/models", json={"name": "m1", "workspaceId": ws}, headers=admin)
    assert made.status_code == 200, made.text
    refused = client.delete(f"/api/v1/workspaces/{ws}", headers=admin)
    assert refused.status_code == 400, refused.text
    assert "holds 1 model(s)" in refused.json()["message"]
    assert client.delete("/api/v1/models/m1", headers=admin).status_code == 200
    assert client.delete(f"/api/v1/workspaces/{ws}", headers=admin).json() == {"completed": True}


def test_moving_experiments_needs_roles_on_both_sides(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice = _user(client, admin, "alice")
    ws = _workspace(client, admin, "locked")["id"]
    dest = _project(client, admin, ws, "dest")["id"]
    client.put(f"/api/v1/workspaces/{ws}/roles/default", json={"role": "viewer"}, headers=admin)
    mine = _experiment(client, alice, 1)
    theirs = _experiment(client, admin, 1)
    into_locked = client.post(
        f"/api/v1/experiments/{mine['id']}/move",
        json={"destinationProjectId": dest, "experimentId": mine["id"]},
        headers=alice,
    )
    assert into_locked.status_code == 403
    others = client.post(
        f"/api/v1/experiments/{theirs['id']}/move",
        json={"destinationProjectId": 1, "experimentId": theirs["id"]},
        headers=alice,
    )
    assert others.status_code == 403
    bulk = client.post(
        "/api/v1/projects/1/experiments/move",
        json={
            "destinationProjectId": dest,
            "experimentIds": [theirs["id"], mine["id"]],
            "projectId": 1,
        },
        headers=admin,
    ).json()["results"]
    assert bulk == [{"error": "", "id": theirs["id"]}, {"error": "", "id": mine["id"]}]
    listed = client.get(f"/api/v1/experiments?projectId={dest}", headers=admin).json()
    assert sorted(e["id"] for e in listed["experiments"]) == sorted([mine["id"], theirs["id"]])
    assert {e["workspaceId"] for e in listed["experiments"]} == {ws}
    in_ws = client.get(f"/api/v1/experiments?workspaceId={ws}", headers=admin).json()
    assert [e["id"] for e in in_ws["experiments"]] == [e["id"] for e in listed["experiments"]]


def test_workspace_storage_and_pools_reach_its_experiments(
    client: TestClient, admin: dict[str, str], tmp_path: Any
) -> None:
    storage = {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "ws-ckpts"}
    ws = _workspace(
        client,
        admin,
        "team",
        checkpointStorageConfig=storage,
        defaultComputePool="gpus",
        defaultAuxPool="cpus",
    )["id"]
    pid = _project(client, admin, ws, "p")["id"]
    compute = client.get(
        f"/api/v1/experiments/{_experiment(client, admin, pid)['id']}", headers=admin
    ).json()
    config = compute["config"]
    assert config["checkpoint_storage"]["storage_path"] == "ws-ckpts"
    assert config["checkpoint_storage"]["host_path"] == str(tmp_path)
    assert config["resources"]["resource_pool"] == "gpus"
    assert compute["experiment"]["resourcePool"] == "gpus"
    aux = _experiment(client, admin, pid, slots=0)
    assert aux["resourcePool"] == "cpus"
    elsewhere = client.get(
        f"/api/v1/experiments/{_experiment(client, admin, 1)['id']}", headers=admin
    ).json()["experiment"]
    assert elsewhere["resourcePool"] == "default"
    secret = {"type": "s3", "bucket": "b", "access_key": "AK", "secret_key": "hush"}
    shown = client.patch(
        f"/api/v1/workspaces/{ws}", json={"checkpointStorageConfig": secret}, headers=admin
    ).json()["workspace"]["checkpointStorageConfig"]
    assert shown["bucket"] == "b"
    assert "hush" not in str(shown)
    bad = client.patch(
        f"/api/v1/workspaces/{ws}",
        json={"checkpointStorageConfig": {"type": "floppy"}},
        headers=admin,
    )
    assert bad.status_code == 400
    cleared = client.patch(
        f"/api/v1/workspaces/{ws}", json={"checkpointStorageConfig": {}}, headers=admin
    )
    assert cleared.json()["workspace"]["checkpointStorageConfig"] is None


@pytest.mark.parametrize("linked", [True, False])
def test_a_workspace_agent_user_wins_over_the_owners_link(client: TestClient, linked: bool) -> None:
    with _state(client).sessions() as session:
        from stalwart.master.db.tables import User

        owner = User(username="o", agent_uid=7, agent_gid=7, agent_user="o", agent_group="o")
        workspace = Workspace(name="w")
        if linked:
            workspace.agent_uid, workspace.agent_gid = 9, 9
            workspace.agent_user, workspace.agent_group = "w", "w"
        run_as = run_as_of(owner, workspace)
        assert run_as is not None
        assert (run_as.uid, run_as.user) == ((9, "w") if linked else (7, "o"))
        session.rollback()


def test_a_project_moves_to_another_workspace_with_its_experiments(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice = _user(client, admin, "alice")
    source = _workspace(client, alice, "source")["id"]
    target = _workspace(client, admin, "target")["id"]
    project = _project(client, alice, source, "travels")["id"]
    exp = _experiment(client, alice, project)
    client.put(f"/api/v1/workspaces/{target}/roles/default", json={"role": "viewer"}, headers=admin)
    body = {"destinationWorkspaceId": target, "projectId": project}
    refused = client.post(f"/api/v1/projects/{project}/move", json=body, headers=alice)
    assert refused.status_code == 403
    moved = client.post(f"/api/v1/projects/{project}/move", json=body, headers=admin)
    assert moved.status_code == 200, moved.text
    assert (
        client.get(f"/api/v1/projects/{project}", headers=admin).json()["project"]["workspaceId"]
        == target
    )
    assert (
        client.get(f"/api/v1/experiments/{exp['id']}", headers=admin).json()["experiment"][
            "workspaceId"
        ]
        == target
    )


def test_tasks_of_a_workspace_use_its_pools_and_an_archived_one_takes_none(
    client: TestClient, admin: dict[str, str]
) -> None:
    ws = _workspace(client, admin, "tasks", defaultComputePool="gpus", defaultAuxPool="cpus")["id"]

    def launch(slots: int) -> Any:
        config = {"entrypoint": ["sleep", "60"], "resources": {"slots": slots}}
        return client.post(
            "/api/v1/commands", json={"config": config, "workspaceId": ws}, headers=admin
        )

    zero = launch(0)
    assert zero.status_code == 200, zero.text
    assert zero.json()["command"]["resourcePool"] == "cpus"
    assert launch(1).json()["command"]["resourcePool"] == "gpus"
    refused = client.delete(f"/api/v1/workspaces/{ws}", headers=admin)
    assert refused.status_code == 400
    assert "running task" in refused.json()["message"]
    client.post(f"/api/v1/workspaces/{ws}/archive", headers=admin)
    archived = launch(0)
    assert archived.status_code == 400
    assert "archived" in archived.json()["message"]


def test_workspace_and_project_lists_filter_by_owner_and_archive_state(
    client: TestClient, admin: dict[str, str]
) -> None:
    bob = _user(client, admin, "bob")
    mine = _workspace(client, admin, "admins")
    bobs = _workspace(client, bob, "bobs")
    _project(client, admin, mine["id"], "kept")
    gone = _project(client, bob, bobs["id"], "gone")
    assert client.post(f"/api/v1/projects/{gone['id']}/archive", headers=admin).status_code == 200
    assert client.post(f"/api/v1/workspaces/{bobs['id']}/archive", headers=admin).status_code == 200

    def names(url: str, key: str, **params: Any) -> set[str]:
        resp = client.get(url, params=params, headers=admin)
        assert resp.status_code == 200, resp.text
        return {x["name"] for x in resp.json()[key]}

    ws = "/api/v1/workspaces"
    assert names(ws, "workspaces", users=["bob"]) == {"bobs"}
    assert names(ws, "workspaces", userIds=[mine["userId"]], archived=False) >= {"admins"}
    assert "bobs" not in names(ws, "workspaces", archived=False)
    assert names(ws, "workspaces", archived=True) == {"bobs"}
    projects = "/api/v1/workspaces/0/projects"
    assert names(projects, "projects", users=["bob"]) == {"gone"}
    assert names(projects, "projects", archived=True) == {"gone"}
    assert "gone" not in names(projects, "projects", archived=False, userIds=[mine["userId"]])
    assert "kept" in names(projects, "projects", archived=False, userIds=[mine["userId"]])
