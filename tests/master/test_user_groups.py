"""User groups (``/api/v1/groups``), roles given to groups (``/workspaces/{id}/roles/groups``),
Determined's role routes (``/roles/...``) and what they mean for ``policy.workspace_role``, on
SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from stalwart.master import policy
from stalwart.master.db.tables import User
from stalwart.master.settings import MasterSettings
from tests.master.conftest import login, make_settings
from tests.security.conftest import make_user, make_workspace, state_of, workspace_of
from tests.security.test_permissions import create_in


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> MasterSettings:
    db = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    return make_settings(tmp_path / "home", db=db)


def _group(client: TestClient, admin: dict[str, str], name: str, *members: int) -> int:
    resp = client.post(
        "/api/v1/groups", json={"name": name, "addUsers": list(members)}, headers=admin
    )
    assert resp.status_code == 200, resp.text
    group_id: int = resp.json()["group"]["groupId"]
    return group_id


def test_groups_are_made_searched_changed_and_deleted(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice = make_user(client, admin, "alice")
    bob = make_user(client, admin, "bob")
    made = client.post("/api/v1/groups", json={"name": "team", "addUsers": [alice]}, headers=admin)
    assert made.status_code == 200, made.text
    group = made.json()["group"]
    assert [u["username"] for u in group["users"]] == ["alice"]
    team = group["groupId"]
    other = _group(client, admin, "other")

    search = client.post("/api/v1/groups/search", json={"limit": 0}, headers=admin).json()
    assert [(g["group"]["name"], g["numMembers"]) for g in search["groups"]] == [
        ("team", 1),
        ("other", 0),
    ]
    assert search["pagination"]["total"] == 2
    by_name = client.post(
        "/api/v1/groups/search", json={"limit": 1, "name": "other"}, headers=admin
    ).json()
    assert [g["group"]["groupId"] for g in by_name["groups"]] == [other]
    of_alice = client.post(
        "/api/v1/groups/search", json={"limit": 10, "userId": alice}, headers=admin
    ).json()
    assert [g["group"]["name"] for g in of_alice["groups"]] == ["team"]

    changed = client.put(
        f"/api/v1/groups/{team}",
        json={"groupId": team, "name": "crew", "addUsers": [bob], "removeUsers": [alice]},
        headers=admin,
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["group"]["name"] == "crew"
    assert [u["username"] for u in changed.json()["group"]["users"]] == ["bob"]
    got = client.get(f"/api/v1/groups/{team}", headers=admin).json()["group"]
    assert got["name"] == "crew"

    assert client.delete(f"/api/v1/groups/{other}", headers=admin).status_code == 200
    assert client.get(f"/api/v1/groups/{other}", headers=admin).status_code == 404


def test_group_changes_say_what_is_wrong(client: TestClient, admin: dict[str, str]) -> None:
    alice = make_user(client, admin, "alice")
    team = _group(client, admin, "team", alice)
    cases: list[tuple[str, str, dict[str, Any], int, str]] = [
        ("POST", "/api/v1/groups", {"name": "team"}, 409, "already exists"),
        ("POST", "/api/v1/groups", {"name": "  "}, 400, "needs a name"),
        ("POST", "/api/v1/groups", {"name": "x", "addUsers": [999]}, 404, "user 999 not found"),
        ("PUT", f"/api/v1/groups/{team}", {"addUsers": [alice]}, 409, "alice already in"),
        ("PUT", f"/api/v1/groups/{team}", {"removeUsers": [1]}, 404, "admin not in user group"),
        ("PUT", f"/api/v1/groups/{team}", {"groupId": team + 1}, 400, "the path names group"),
        ("PUT", "/api/v1/groups/999", {"name": "y"}, 404, "user group 999 not found"),
    ]
    for method, path, body, status, message in cases:
        resp = client.request(method, path, json=body, headers=admin)
        assert resp.status_code == status, (path, body, resp.text)
        assert message in resp.json()["message"], resp.text
    # nothing was written by the refused requests
    group = client.get(f"/api/v1/groups/{team}", headers=admin).json()["group"]
    assert [u["username"] for u in group["users"]] == ["alice"]
    names = client.post("/api/v1/groups/search", json={}, headers=admin).json()["groups"]
    assert [g["group"]["name"] for g in names] == ["team"]


def test_only_cluster_admins_change_groups(client: TestClient, admin: dict[str, str]) -> None:
    alice = make_user(client, admin, "alice")
    team = _group(client, admin, "team")
    user = login(client, "alice")
    assert client.post("/api/v1/groups/search", json={}, headers=user).status_code == 200
    assert client.get(f"/api/v1/groups/{team}", headers=user).status_code == 200
    for method, path, body in (
        ("POST", "/api/v1/groups", {"name": "mine"}),
        ("PUT", f"/api/v1/groups/{team}", {"addUsers": [alice]}),
        ("DELETE", f"/api/v1/groups/{team}", None),
    ):
        resp = client.request(method, path, json=body, headers=user)
        assert resp.status_code == 403, resp.text
        assert "only a cluster admin can" in resp.json()["message"]


@contextmanager
def _count_queries(client: TestClient) -> Iterator[list[str]]:
    engine = state_of(client).engine
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


def test_a_users_role_is_the_highest_of_own_groups_and_default(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice = make_user(client, admin, "alice")
    project = make_workspace(client, "private", default_role="none")
    workspace = workspace_of(client, project)
    team = _group(client, admin, "team", alice)
    crew = _group(client, admin, "crew", alice)
    roles = f"/api/v1/workspaces/{workspace}/roles"

    def role() -> policy.Role:
        with state_of(client).sessions() as session:
            user = session.get(User, alice)
            assert user is not None
            with _count_queries(client) as queries:
                found = policy.workspace_role(session, user, workspace)
            assert len(queries) == 1, queries  # one query, whatever the groups
            return found

    assert role() is policy.Role.NONE
    assert client.put(f"{roles}/groups/{team}", json={"role": "viewer"}, headers=admin).is_success
    assert role() is policy.Role.VIEWER
    assert client.put(f"{roles}/groups/{crew}", json={"role": "editor"}, headers=admin).is_success
    assert role() is policy.Role.EDITOR
    assert client.put(f"{roles}/users/{alice}", json={"role": "member"}, headers=admin).is_success
    assert role() is policy.Role.EDITOR  # the group's role is higher
    answer = client.get(roles, headers=admin).json()
    assert answer["groupAssignments"] == [
        {"groupId": team, "groupName": "team", "role": "viewer"},
        {"groupId": crew, "groupName": "crew", "role": "editor"},
    ]
    assert client.delete(f"{roles}/groups/{crew}", headers=admin).is_success
    assert role() is policy.Role.MEMBER
    client.delete(f"{roles}/users/{alice}", headers=admin)
    assert role() is policy.Role.VIEWER
    assert client.put(f"{roles}/default", json={"role": "editor"}, headers=admin).is_success
    assert role() is policy.Role.EDITOR  # the default is the least everyone has
    client.put(f"{roles}/default", json={"role": "none"}, headers=admin)
    client.put(f"/api/v1/groups/{team}", json={"removeUsers": [alice]}, headers=admin)
    assert role() is policy.Role.NONE


def test_a_groups_role_opens_experiments_and_lists(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice = make_user(client, admin, "alice")
    project = make_workspace(client, "private", default_role="none")
    workspace = workspace_of(client, project)
    experiment = create_in(client, admin, project)
    assert experiment is not None
    user = login(client, "alice")

    def listed() -> set[int]:
        found = client.get("/api/v1/experiments", headers=user).json()["experiments"]
        return {e["id"] for e in found}

    assert client.get(f"/api/v1/experiments/{experiment}", headers=user).status_code == 403
    assert experiment not in listed()
    assert create_in(client, user, project) is None
    team = _group(client, admin, "team", alice)
    path = f"/api/v1/workspaces/{workspace}/roles/groups/{team}"
    assert client.put(path, json={"role": "member"}, headers=admin).is_success
    assert client.get(f"/api/v1/experiments/{experiment}", headers=user).status_code == 200
    assert experiment in listed()
    assert create_in(client, user, project) is not None
    client.delete(f"/api/v1/groups/{team}", headers=admin)  # its roles go with it
    assert client.get(f"/api/v1/experiments/{experiment}", headers=user).status_code == 403
    assert experiment not in listed()


def test_group_roles_are_managed_by_workspace_admins(
    client: TestClient, admin: dict[str, str]
) -> None:
    wanda = make_user(client, admin, "wanda")
    make_user(client, admin, "bob")
    project = make_workspace(client, "private", default_role="none")
    workspace = workspace_of(client, project)
    team = _group(client, admin, "team")
    base = f"/api/v1/workspaces/{workspace}/roles"
    client.put(f"{base}/users/{wanda}", json={"role": "admin"}, headers=admin)
    bob = login(client, "bob")
    refused = client.put(f"{base}/groups/{team}", json={"role": "viewer"}, headers=bob)
    assert refused.status_code == 403
    assert "can change its role assignments" in refused.json()["message"]
    wanda_h = login(client, "wanda")
    assert client.put(f"{base}/groups/{team}", json={"role": "viewer"}, headers=wanda_h).is_success
    assert client.delete(f"{base}/groups/{team}", headers=wanda_h).is_success
    bad = client.put(f"{base}/groups/{team}", json={"role": "owner"}, headers=admin)
    assert bad.status_code == 400
    missing = client.put(f"{base}/groups/999", json={"role": "viewer"}, headers=admin)
    assert missing.status_code == 404


def _assign(group: int, role_id: int, workspace: int | None) -> dict[str, Any]:
    scope: dict[str, Any] = {"role": {"roleId": role_id}}
    if workspace is not None:
        scope["scopeWorkspaceId"] = workspace
    return {"groupRoleAssignments": [{"groupId": group, "roleAssignment": scope}]}


def test_determineds_role_routes_map_onto_the_four_roles(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice = make_user(client, admin, "alice")
    project = make_workspace(client, "private", default_role="none")
    workspace = workspace_of(client, project)
    team = _group(client, admin, "team", alice)
    roles = client.post("/api/v1/roles/search", json={"limit": 500}, headers=admin).json()
    assert [(r["roleId"], r["name"]) for r in roles["roles"]] == [
        (1, "Viewer"),
        (2, "Member"),
        (3, "Editor"),
        (4, "WorkspaceAdmin"),
    ]
    add = "/api/v1/roles/add-assignments"
    assert client.post(add, json=_assign(team, 3, workspace), headers=admin).is_success
    by_group = client.get(f"/api/v1/roles/search/by-group/{team}", headers=admin).json()
    (editor,) = by_group["roles"]
    assert (editor["roleId"], editor["name"]) == (3, "Editor")
    assert editor["scopeTypeMask"] == {"cluster": False, "workspace": True}
    assert [(p["id"], p["name"]) for p in editor["permissions"]] == [
        ("PERMISSION_TYPE_VIEW_WORKSPACE", "see the workspace and its projects"),
        (
            "PERMISSION_TYPE_VIEW_EXPERIMENT_ARTIFACTS",
            "read its experiments, trials, checkpoints, logs and tasks",
        ),
        ("PERMISSION_TYPE_CREATE_EXPERIMENT", "create experiments and start tasks"),
        ("PERMISSION_TYPE_UPDATE_EXPERIMENT", "change every experiment of the workspace"),
    ]
    assert by_group["assignments"] == [
        {"roleId": 3, "scopeWorkspaceIds": [workspace], "scopeCluster": False}
    ]
    described = client.post("/api/v1/roles/search/by-ids", json={"roleIds": [3]}, headers=admin)
    (role,) = described.json()["roles"]
    assert role["role"]["name"] == "Editor"
    assert [g["groupId"] for g in role["groupRoleAssignments"]] == [team]
    by_user = client.get(f"/api/v1/roles/search/by-user/{alice}", headers=admin).json()
    (entry,) = by_user["roles"]
    assert entry["role"]["name"] == "Editor"
    assert entry["groupRoleAssignments"][0]["groupId"] == team
    assert entry["userRoleAssignments"] == []

    # alice sees where she has roles and what she may do; she cannot give roles
    user = login(client, "alice")
    assert client.get(f"/api/v1/roles/search/by-user/{alice}", headers=user).json() == by_user
    summary = client.get("/api/v1/permissions/summary", headers=user).json()
    assert [r["name"] for r in summary["roles"]] == ["Member", "Editor"]
    assert summary["assignments"] == [
        {"roleId": 2, "scopeWorkspaceIds": [1], "scopeCluster": False},  # the default role
        {"roleId": 3, "scopeWorkspaceIds": [workspace], "scopeCluster": False},
    ]
    everywhere = client.get("/api/v1/permissions/summary", headers=admin).json()
    assert everywhere["assignments"] == [
        {"roleId": 4, "scopeWorkspaceIds": [], "scopeCluster": True}
    ]
    refused = client.post(add, json=_assign(team, 4, 1), headers=user)
    assert refused.status_code == 403

    for body, status, message in (
        (_assign(team, 9, workspace), 400, "unknown role id 9"),
        (_assign(team, 1, None), 400, "not cluster-wide"),
        (_assign(team, 1, 999), 404, "workspace 999 not found"),
        (_assign(999, 1, workspace), 404, "user group 999 not found"),
    ):
        resp = client.post(add, json=body, headers=admin)
        assert resp.status_code == status, resp.text
        assert message in resp.json()["message"]
    remove = "/api/v1/roles/remove-assignments"
    wrong = client.post(remove, json=_assign(team, 1, workspace), headers=admin)
    assert wrong.status_code == 404
    assert "its role there is Editor" in wrong.json()["message"]
    assert client.post(remove, json=_assign(team, 3, workspace), headers=admin).is_success
    assert client.get(f"/api/v1/roles/search/by-group/{team}", headers=admin).json() == {
        "roles": [],
        "assignments": [],
    }
