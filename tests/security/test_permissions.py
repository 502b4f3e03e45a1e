"""The permission matrix: who may see, create and change experiments, manage workspace roles
and change users (rules: :mod:`stalwart.master.policy`; docs/security.md).

The world: ``Uncategorized`` keeps its default role (``member``: everyone reads, creates, and
changes their own); workspace ``team`` has default role ``none`` and assignments mia and mike
``member``, vera ``viewer``, eddie ``editor``, wanda ``admin``. alice owns the Uncategorized
experiments, mia the team's. bob has no assignment anywhere; ``admin`` is a cluster admin.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from tests.master.test_allocations_api import CONFIG, add_trial
from tests.master.test_experiments_api import complete
from tests.security.conftest import (
    login,
    make_settings,
    make_user,
    make_workspace,
    state_of,
    workspace_of,
)

USERS = ("alice", "bob", "mia", "mike", "vera", "eddie", "wanda")
TEAM_ROLES = {"mia": "member", "mike": "member", "vera": "viewer", "eddie": "editor"}


@dataclass
class World:
    client: TestClient
    headers: dict[str, dict[str, str]]
    ids: dict[str, int]
    team_project: int
    team_workspace: int
    experiments: dict[str, int] = field(default_factory=dict)
    allocations: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, str] = field(default_factory=dict)

    def new_experiment(self, where: str) -> int:
        """A new experiment owned by alice (Uncategorized) or mia (team), with one trial."""
        owner, project = ("alice", 1) if where == "uncategorized" else ("mia", self.team_project)
        experiment_id = create_in(self.client, self.headers[owner], project)
        assert experiment_id is not None
        return experiment_id


def create_in(client: TestClient, headers: dict[str, str], project_id: int) -> int | None:
    """Create an experiment in a project; its id, or None when refused (403)."""
    files = [
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
    resp = client.post(
        "/api/v1/experiments",
        json={
            "activate": True,
            "config": CONFIG,
            "modelDefinition": files,
            "projectId": project_id,
        },
        headers=headers,
    )
    if resp.status_code == 403:
        assert "cannot create experiments" in resp.json()["message"]
        return None
    assert resp.status_code == 200, resp.text
    experiment_id: int = resp.json()["experiment"]["id"]
    return experiment_id


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    settings = make_settings(tmp_path_factory.mktemp("permissions") / "home")
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        ids = {name: make_user(client, admin, name) for name in USERS}
        ids["admin"] = 1
        headers = {name: login(client, name) for name in USERS}
        headers["admin"] = admin
        team_project = make_workspace(client, "team")
        team = workspace_of(client, team_project)
        roles = f"/api/v1/workspaces/{team}/roles"
        put = client.put(f"{roles}/default", json={"role": "none"}, headers=admin)
        assert put.status_code == 200, put.text
        put = client.put(f"{roles}/users/{ids['wanda']}", json={"role": "admin"}, headers=admin)
        assert put.status_code == 200, put.text
        for name, role in TEAM_ROLES.items():  # a workspace admin assigns the others
            resp = client.put(
                f"{roles}/users/{ids[name]}", json={"role": role}, headers=headers["wanda"]
            )
            assert resp.status_code == 200, resp.text
        w = World(client, headers, ids, team_project, team)
        for where in ("uncategorized", "team"):
            w.experiments[where] = w.new_experiment(where)
            env = add_trial(state_of(client), w.experiments[where])
            w.ids[f"{where}-trial"] = env.trial_id
            w.allocations[where] = env.allocation_id
            w.tasks[where] = env.task_id
        yield w


def test_the_roles_are_listed(world: World) -> None:
    resp = world.client.get(
        f"/api/v1/workspaces/{world.team_workspace}/roles", headers=world.headers["vera"]
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["defaultRole"] == "none"
    got = {a["username"]: a["role"] for a in body["assignments"]}
    assert got == {**TEAM_ROLES, "wanda": "admin"}
    # someone without a role in the workspace learns neither it nor who holds roles there
    hidden = world.client.get(
        f"/api/v1/workspaces/{world.team_workspace}/roles", headers=world.headers["bob"]
    )
    assert hidden.status_code == 404, hidden.text


SEES = [
    ("alice", "uncategorized", True),
    ("bob", "uncategorized", True),
    ("vera", "uncategorized", True),
    ("admin", "uncategorized", True),
    ("bob", "team", False),
    ("alice", "team", False),
    ("vera", "team", True),
    ("mike", "team", True),
    ("mia", "team", True),
    ("eddie", "team", True),
    ("wanda", "team", True),
    ("admin", "team", True),
]


@pytest.mark.parametrize(("who", "where", "allowed"), SEES)
def test_who_sees_an_experiment(world: World, who: str, where: str, allowed: bool) -> None:
    headers = world.headers[who]
    experiment = world.experiments[where]
    trial = world.ids[f"{where}-trial"]
    expected = 200 if allowed else 403
    for path in (
        f"/api/v1/experiments/{experiment}",
        f"/api/v1/experiments/{experiment}/trials",
        f"/api/v1/experiments/{experiment}/checkpoints",
        f"/api/v1/trials/{trial}",
        f"/api/v1/trials/{trial}/checkpoints",
        f"/api/v1/trials/{trial}/logs",
        f"/api/v1/tasks/{world.tasks[where]}/logs",
        # the UI's logs download and failure cause follow the logs' rules exactly
        f"/api/v1/ui/trials/{trial}/logs/download",
        f"/api/v1/ui/tasks/{world.tasks[where]}/logs/download",
        f"/api/v1/ui/trials/{trial}/cause",
        f"/api/v1/ui/experiments/{experiment}/cause",
    ):
        resp = world.client.get(path, headers=headers)
        assert resp.status_code == expected, (path, resp.text)
    if not allowed:
        assert (
            "no role"
            in world.client.get(f"/api/v1/experiments/{experiment}", headers=headers).json()[
                "message"
            ]
        )
    metrics = world.client.get(
        f"/api/v1/trials/metrics/trial_metrics?trialIds={trial}&group=training", headers=headers
    )
    assert metrics.status_code == expected, metrics.text
    listed = world.client.get("/api/v1/experiments", headers=headers).json()["experiments"]
    assert (experiment in {e["id"] for e in listed}) is allowed
    running = world.client.get("/api/v1/tasks", headers=headers).json()["allocationIdToSummary"]
    assert (world.allocations[where] in running) is allowed


CREATES = [
    ("bob", "uncategorized", True),
    ("vera", "uncategorized", True),
    ("bob", "team", False),
    ("vera", "team", False),
    ("mike", "team", True),
    ("eddie", "team", True),
    ("wanda", "team", True),
    ("admin", "team", True),
]


@pytest.mark.parametrize(("who", "where", "allowed"), CREATES)
def test_who_creates_experiments(world: World, who: str, where: str, allowed: bool) -> None:
    project = 1 if where == "uncategorized" else world.team_project
    created = create_in(world.client, world.headers[who], project)
    assert (created is not None) is allowed


CHANGERS = [
    ("alice", "uncategorized", True),  # the owner
    ("bob", "uncategorized", False),  # another member
    ("eddie", "uncategorized", False),  # an editor elsewhere is a member here
    ("admin", "uncategorized", True),
    ("mia", "team", True),  # the owner, a member
    ("mike", "team", False),  # another member
    ("vera", "team", False),  # a viewer
    ("bob", "team", False),  # no role
    ("eddie", "team", True),  # an editor changes everyone's
    ("wanda", "team", True),  # the workspace's admin
    ("admin", "team", True),
]
ACTIONS = ("pause", "kill", "edit", "kill-trial", "archive", "delete")


def _act(world: World, who: str, experiment: int, action: str) -> int:
    client, headers = world.client, world.headers[who]
    if action in ("archive", "delete"):
        complete(client, experiment)
    if action == "edit":
        path = f"/api/v1/experiments/{experiment}"
        resp = client.patch(path, json={"description": "x"}, headers=headers)
    elif action == "delete":
        resp = client.delete(f"/api/v1/experiments/{experiment}", headers=headers)
    elif action == "kill-trial":
        trial = add_trial(state_of(client), experiment).trial_id
        resp = client.post(f"/api/v1/trials/{trial}/kill", headers=headers)
    else:
        resp = client.post(f"/api/v1/experiments/{experiment}/{action}", headers=headers)
    status: int = resp.status_code
    return status


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize(("who", "where", "allowed"), CHANGERS)
def test_who_changes_an_experiment(
    world: World, who: str, where: str, allowed: bool, action: str
) -> None:
    experiment = world.new_experiment(where)
    status = _act(world, who, experiment, action)
    assert status == (200 if allowed else 403), (who, where, action, status)


def test_granting_editor_lets_a_user_change_others_experiments(world: World) -> None:
    client, admin = world.client, world.headers["admin"]
    experiment = world.new_experiment("uncategorized")
    bob = world.headers["bob"]
    assert client.post(f"/api/v1/experiments/{experiment}/pause", headers=bob).status_code == 403
    grant = f"/api/v1/workspaces/1/roles/users/{world.ids['bob']}"
    assert client.put(grant, json={"role": "editor"}, headers=admin).status_code == 200
    try:
        resp = client.post(f"/api/v1/experiments/{experiment}/pause", headers=bob)
        assert resp.status_code == 200, resp.text
    finally:
        assert client.delete(grant, headers=admin).status_code == 200
    assert client.post(f"/api/v1/experiments/{experiment}/activate", headers=bob).status_code == 403


MANAGERS = [
    ("wanda", "team", True),
    ("admin", "team", True),
    ("eddie", "team", False),
    ("vera", "team", False),
    ("bob", "team", False),
    ("wanda", "uncategorized", False),  # a workspace admin elsewhere
    ("bob", "uncategorized", False),
    ("admin", "uncategorized", True),
]


@pytest.mark.parametrize(("who", "where", "allowed"), MANAGERS)
def test_who_manages_role_assignments(world: World, who: str, where: str, allowed: bool) -> None:
    workspace = world.team_workspace if where == "team" else 1
    path = f"/api/v1/workspaces/{workspace}/roles/users/{world.ids['alice']}"
    resp = world.client.put(path, json={"role": "viewer"}, headers=world.headers[who])
    assert resp.status_code == (200 if allowed else 403), resp.text
    if allowed:
        undo = world.client.delete(path, headers=world.headers[who])
        assert undo.status_code == 200
    else:
        assert "can change its role assignments" in resp.json()["message"]


def test_role_assignment_errors_say_what_to_do(world: World) -> None:
    client, admin = world.client, world.headers["admin"]
    base = f"/api/v1/workspaces/{world.team_workspace}/roles"
    bad = client.put(f"{base}/users/{world.ids['bob']}", json={"role": "owner"}, headers=admin)
    assert bad.status_code == 400
    assert "use one of viewer, member, editor, admin" in bad.json()["message"]
    none = client.put(f"{base}/users/{world.ids['bob']}", json={"role": "none"}, headers=admin)
    assert none.status_code == 400
    assert (
        client.put(f"{base}/users/9999", json={"role": "viewer"}, headers=admin).status_code == 404
    )
    missing = client.get("/api/v1/workspaces/9999/roles", headers=admin)
    assert missing.status_code == 404
    uncategorized = client.put(
        "/api/v1/workspaces/1/roles/default", json={"role": "none"}, headers=admin
    )
    assert uncategorized.status_code == 400
    assert "cannot be none" in uncategorized.json()["message"]


USER_CHANGES = [
    ("bob", "alice", {"displayName": "Bobbed"}, False),
    ("bob", "bob", {"displayName": "Bob B."}, True),
    ("wanda", "alice", {"displayName": "Wanda was here"}, False),
    ("bob", "alice", {"active": False}, False),
    ("bob", "bob", {"admin": True}, False),
    ("admin", "alice", {"displayName": "Alice A."}, True),
]


@pytest.mark.parametrize(("who", "target", "patch", "allowed"), USER_CHANGES)
def test_who_changes_users(
    world: World, who: str, target: str, patch: dict[str, object], allowed: bool
) -> None:
    path = f"/api/v1/users/{world.ids[target]}"
    resp = world.client.patch(path, json=patch, headers=world.headers[who])
    assert resp.status_code == (200 if allowed else 403), resp.text


def test_only_admins_create_users(world: World) -> None:
    body = {"user": {"username": "carol", "admin": False, "active": True}}
    refused = world.client.post("/api/v1/users", json=body, headers=world.headers["wanda"])
    assert refused.status_code == 403
    created = world.client.post("/api/v1/users", json=body, headers=world.headers["admin"])
    assert created.status_code == 200


def test_roles_live_in_postgresql_too(tmp_path: Path, pg_url: str) -> None:
    """The same rules on PostgreSQL (the table, its unique key and the cascade on delete)."""
    settings = make_settings(tmp_path / "home", db=pg_url)
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        bob_id = make_user(client, admin, "bob")
        bob = login(client, "bob")
        project = make_workspace(client, "pg-team", default_role="none")
        workspace = workspace_of(client, project)
        assert create_in(client, bob, project) is None
        path = f"/api/v1/workspaces/{workspace}/roles/users/{bob_id}"
        assert client.put(path, json={"role": "viewer"}, headers=admin).status_code == 200
        assert client.put(path, json={"role": "member"}, headers=admin).status_code == 200
        assert create_in(client, bob, project) is not None
        roles = client.get(f"/api/v1/workspaces/{workspace}/roles", headers=bob).json()
        assert roles["assignments"] == [{"userId": bob_id, "username": "bob", "role": "member"}]
