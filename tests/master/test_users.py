"""Users endpoints, as the official 0.38.1 client (``det user ...``, the SDK) calls them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.services.passwords import client_hash
from stalwart.master.settings import MasterSettings
from tests.master.conftest import login

Headers = dict[str, str]
REQUIRED_USER_KEYS = ("username", "admin", "active")
PASSWORD = "Secret-Pa55"


def create(
    client: TestClient,
    headers: Headers,
    username: str,
    password: str = PASSWORD,
    **user: Any,
) -> dict[str, Any]:
    """Create a user the way ``Determined.create_user`` does; returns the wire user."""
    body = {
        "isHashed": True,
        "password": client_hash(password),
        "user": {"active": True, "admin": False, "remote": False, "username": username, **user},
    }
    resp = client.post("/api/v1/users", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    created: dict[str, Any] = resp.json()["user"]
    return created


def login_status(client: TestClient, username: str, password: str) -> tuple[int, str]:
    resp = client.post(
        "/api/v1/auth/login",
        json={"username": username, "password": client_hash(password), "isHashed": True},
    )
    client.cookies.clear()
    message = "" if resp.status_code == 200 else resp.json()["error"]["error"]
    return resp.status_code, message


def error(resp: Any) -> tuple[int, str, str]:
    body = resp.json()
    return resp.status_code, body["error"]["reason"], body["error"]["error"]


def patch(client: TestClient, headers: Headers, user_id: int, **fields: Any) -> Any:
    return client.patch(f"/api/v1/users/{user_id}", json=fields, headers=headers)


# --- listing and reading ---


def test_every_users_endpoint_needs_credentials(client: TestClient) -> None:
    for method, path in (
        ("GET", "/api/v1/users"),
        ("GET", "/api/v1/users/1"),
        ("GET", "/api/v1/users/admin/by-username"),
        ("POST", "/api/v1/users"),
        ("PATCH", "/api/v1/users/1"),
        ("PATCH", "/api/v1/users"),
        ("POST", "/api/v1/users/1/password"),
    ):
        resp = client.request(method, path, json={})
        assert resp.status_code == 401, (method, path, resp.text)
        assert resp.json()["error"]["reason"] == "Unauthenticated"


def test_list_has_required_keys_and_pagination(client: TestClient, admin: Headers) -> None:
    resp = client.get("/api/v1/users", headers=admin)
    assert resp.status_code == 200
    body = resp.json()
    assert [u["username"] for u in body["users"]] == ["admin", "determined"]
    for user in body["users"]:
        for key in (*REQUIRED_USER_KEYS, "id", "remote"):
            assert key in user
        assert user["active"] is True
        assert user["remote"] is False
    assert body["users"][0]["admin"] is True
    assert body["users"][1]["admin"] is False
    assert body["pagination"] == {
        "offset": 0,
        "limit": 0,
        "startIndex": 0,
        "endIndex": 2,
        "total": 2,
    }


def test_any_user_may_list_and_read_users(client: TestClient) -> None:
    user = login(client, "determined")
    assert client.get("/api/v1/users", headers=user).status_code == 200
    assert client.get("/api/v1/users/1", headers=user).json()["user"]["username"] == "admin"


def test_list_pages_the_way_read_paginated_walks(client: TestClient, admin: Headers) -> None:
    for i in range(5):
        create(client, admin, f"user{i}")
    seen: list[str] = []
    offset = 0
    while True:
        body = client.get(
            "/api/v1/users", params={"offset": offset, "limit": 3}, headers=admin
        ).json()
        seen += [u["username"] for u in body["users"]]
        page = body["pagination"]
        assert page["total"] == 7
        if page["endIndex"] >= page["total"]:
            break
        offset = page["endIndex"]
    assert seen == ["admin", "determined", *(f"user{i}" for i in range(5))]
    last = client.get("/api/v1/users", params={"offset": -2}, headers=admin).json()
    assert [u["username"] for u in last["users"]] == ["user3", "user4"]
    beyond = client.get("/api/v1/users", params={"offset": 50}, headers=admin).json()
    assert beyond["users"] == []
    assert beyond["pagination"]["endIndex"] == 7


def test_list_filters(client: TestClient, admin: Headers) -> None:
    create(client, admin, "alice", displayName="Wonder Land")
    bob = create(client, admin, "bob", admin=True)
    assert patch(client, admin, bob["id"], active=False).status_code == 200

    def names(**params: Any) -> list[str]:
        resp = client.get("/api/v1/users", params=params, headers=admin)
        assert resp.status_code == 200, resp.text
        return [u["username"] for u in resp.json()["users"]]

    assert names(active="true") == ["admin", "determined", "alice"]
    assert names(active="false") == ["bob"]
    assert names(admin="true") == ["admin", "bob"]
    assert names(admin="false", active="true") == ["determined", "alice"]
    assert names(name="ADM") == ["admin"]
    assert names(name="wonder") == ["alice"]
    assert names(name="%") == []


def test_list_sorts(client: TestClient, admin: Headers) -> None:
    create(client, admin, "zed", displayName="Aaron")
    create(client, admin, "carl")

    def names(sort: str, order: str = "ORDER_BY_ASC") -> list[str]:
        resp = client.get("/api/v1/users", params={"sortBy": sort, "orderBy": order}, headers=admin)
        assert resp.status_code == 200, resp.text
        return [u["username"] for u in resp.json()["users"]]

    assert names("SORT_BY_USER_NAME") == ["admin", "carl", "determined", "zed"]
    assert names("SORT_BY_USER_NAME", "ORDER_BY_DESC") == ["zed", "determined", "carl", "admin"]
    assert names("SORT_BY_NAME") == ["zed", "admin", "carl", "determined"]  # "Aaron" first
    assert names("SORT_BY_DISPLAY_NAME") == ["zed", "admin", "determined", "carl"]  # nulls last
    assert names("SORT_BY_ADMIN", "ORDER_BY_DESC")[0] == "admin"
    assert names("SORT_BY_UNSPECIFIED", "ORDER_BY_DESC") == ["carl", "zed", "determined", "admin"]
    for key in (
        "SORT_BY_ACTIVE",
        "SORT_BY_MODIFIED_TIME",
        "SORT_BY_LAST_AUTH_TIME",
        "SORT_BY_REMOTE",
    ):
        assert len(names(key)) == 4


def test_list_refuses_unknown_enums_and_role_filters(client: TestClient, admin: Headers) -> None:
    resp = client.get("/api/v1/users", params={"sortBy": "SORT_BY_SHOE_SIZE"}, headers=admin)
    assert error(resp)[:2] == (400, "InvalidArgument")
    resp = client.get("/api/v1/users", params={"roleIdAssignedDirectlyToUser": 1}, headers=admin)
    assert error(resp)[:2] == (400, "InvalidArgument")
    assert "RBAC" in error(resp)[2]


def test_get_user_by_id_and_by_username(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "carol", displayName="Carol C")
    by_id = client.get(f"/api/v1/users/{made['id']}", headers=admin)
    by_name = client.get("/api/v1/users/carol/by-username", headers=admin)
    assert by_id.status_code == by_name.status_code == 200
    assert by_id.json() == by_name.json() == {"user": made}
    for key in REQUIRED_USER_KEYS:
        assert key in by_id.json()["user"]
    assert made["displayName"] == "Carol C"
    assert made["modifiedAt"].endswith("Z")
    assert made["lastAuthAt"] is None


def test_unknown_users_are_404(client: TestClient, admin: Headers) -> None:
    for path in ("/api/v1/users/999", "/api/v1/users/nobody/by-username", "/api/v1/users/abc"):
        resp = client.get(path, headers=admin)
        assert error(resp)[:2] == (404, "NotFound"), path
    assert "user 999 not found" in error(client.get("/api/v1/users/999", headers=admin))[2]
    assert error(patch(client, admin, 999, displayName="x"))[0] == 404


# --- creating ---


def test_create_then_log_in(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "dave")
    assert made["username"] == "dave"
    assert made["admin"] is False
    assert made["active"] is True
    assert isinstance(made["id"], int)
    headers = login(client, "dave", PASSWORD)
    me = client.get("/api/v1/me", headers=headers).json()["user"]
    assert me["id"] == made["id"]
    assert me["lastAuthAt"] is not None


def test_create_admin_with_plain_password_and_agent_group(
    client: TestClient, admin: Headers
) -> None:
    resp = client.post(
        "/api/v1/users",
        json={
            "user": {
                "username": "  erin ",
                "admin": True,
                "agent_user_group": {
                    "agentUid": 1000,
                    "agentGid": 1001,
                    "agentUser": "erin",
                    "agentGroup": "lab",
                },
            },
            "password": "plain-Pa55",
            "is_hashed": False,
        },
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    made = resp.json()["user"]
    assert made["username"] == "erin"
    assert made["admin"] is True
    assert made["active"] is True  # unset means active
    assert made["agentUserGroup"] == {
        "agentUid": 1000,
        "agentGid": 1001,
        "agentUser": "erin",
        "agentGroup": "lab",
    }
    assert login_status(client, "erin", "plain-Pa55") == (200, "")


def test_create_with_null_password_means_no_password(client: TestClient, admin: Headers) -> None:
    body = {"password": None, "isHashed": True, "user": {"username": "frank", "admin": False}}
    assert client.post("/api/v1/users", json=body, headers=admin).status_code == 200
    assert login_status(client, "frank", "")[0] == 200


def test_only_admins_create_users(client: TestClient) -> None:
    user = login(client, "determined")
    resp = client.post("/api/v1/users", json={"user": {"username": "x"}}, headers=user)
    assert error(resp)[:2] == (403, "PermissionDenied")
    assert "only an admin can create users" in error(resp)[2]


def test_duplicate_username_is_409(client: TestClient, admin: Headers) -> None:
    create(client, admin, "gina")
    for name in ("gina", "GINA"):
        body = {"user": {"username": name}, "password": ""}
        resp = client.post("/api/v1/users", json=body, headers=admin)
        status, reason, message = error(resp)
        assert (status, reason) == (409, "AlreadyExists")
        assert "already exists" in message
        assert "gina" in message
    resp = client.post("/api/v1/users", json={"user": {"username": "admin"}}, headers=admin)
    assert error(resp) == (409, "AlreadyExists", "user 'admin' already exists")


@pytest.mark.parametrize(
    ("username", "fragment"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("two words", "not allowed"),
        ("slash/name", "not allowed"),
        ("ünïcode", "not allowed"),
        ("x" * 256, "longer than 255"),
    ],
)
def test_invalid_usernames_are_400(
    client: TestClient, admin: Headers, username: str, fragment: str
) -> None:
    resp = client.post("/api/v1/users", json={"user": {"username": username}}, headers=admin)
    status, reason, message = error(resp)
    assert (status, reason) == (400, "InvalidArgument")
    assert fragment in message


def test_builtin_names_stay_reserved_after_a_rename(client: TestClient, admin: Headers) -> None:
    assert patch(client, admin, 2, username="guest").status_code == 200
    assert patch(client, admin, 1, username="root").status_code == 200
    for name, fragment in (("determined", "built-in user"), ("Admin", "only an admin user")):
        resp = client.post("/api/v1/users", json={"user": {"username": name}}, headers=admin)
        assert error(resp)[:2] == (400, "InvalidArgument"), name
        assert fragment in error(resp)[2]
    assert create(client, admin, "admin", admin=True)["admin"] is True
    assert error(patch(client, admin, 2, username="determined"))[0] == 400  # as in Determined


def test_malformed_create_requests_are_400(client: TestClient, admin: Headers) -> None:
    for body in ({}, {"user": None}, {"user": {"admin": True}}):
        resp = client.post("/api/v1/users", json=body, headers=admin)
        assert error(resp)[:2] == (400, "InvalidArgument"), body
    partial = {"user": {"username": "hank", "agentUserGroup": {"agentUid": 5}}}
    resp = client.post("/api/v1/users", json=partial, headers=admin)
    assert error(resp)[0] == 400
    assert "go together" in error(resp)[2]


def test_remote_users_have_no_password_login(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "ivy", password="", remote=True)
    assert made["remote"] is True
    assert login_status(client, "ivy", "") == (401, "invalid credentials")
    body = {"user": {"username": "jack", "remote": True}, "password": client_hash("pw")}
    resp = client.post("/api/v1/users", json=body, headers=admin)
    assert error(resp)[0] == 400
    assert "remote user cannot have a password" in error(resp)[2]


# --- login outcomes ---


def test_wrong_password_is_401_invalid_credentials(client: TestClient, admin: Headers) -> None:
    create(client, admin, "kate")
    assert login_status(client, "kate", "wrong") == (401, "invalid credentials")
    assert login_status(client, "nobody", "") == (401, "invalid credentials")


def test_inactive_user_gets_403_on_login(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "liam")
    assert patch(client, admin, made["id"], active=False).json()["user"]["active"] is False
    assert login_status(client, "liam", PASSWORD) == (403, "user is not active")
    assert login_status(client, "liam", "wrong") == (401, "invalid credentials")
    assert patch(client, admin, made["id"], active=True).json()["user"]["active"] is True
    assert login_status(client, "liam", PASSWORD) == (200, "")


# --- patching ---


def test_deactivation_ends_sessions(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "mia")
    first = login(client, "mia", PASSWORD)
    second = login(client, "mia", PASSWORD)
    assert client.get("/api/v1/me", headers=first).status_code == 200
    resp = patch(client, admin, made["id"], active=False)
    assert resp.status_code == 200
    assert resp.json()["user"]["active"] is False
    for headers in (first, second):
        assert client.get("/api/v1/me", headers=headers).status_code == 401
    assert client.get("/api/v1/me", headers=admin).status_code == 200


def test_nobody_deactivates_themselves(client: TestClient, admin: Headers) -> None:
    other = create(client, admin, "nina", admin=True)
    resp = patch(client, admin, 1, active=False)
    status, reason, message = error(resp)
    assert (status, reason) == (400, "FailedPrecondition")
    assert "cannot deactivate yourself" in message
    nina = login(client, "nina", PASSWORD)
    assert patch(client, nina, 1, active=False).status_code == 200  # another admin can
    assert client.get("/api/v1/me", headers=admin).status_code == 401
    assert other["admin"] is True


def test_the_last_active_admin_stays(client: TestClient, admin: Headers) -> None:
    second = create(client, admin, "otto", admin=True)
    otto = login(client, "otto", PASSWORD)
    # otto may demote admin, but then cannot demote or deactivate himself: he is the last one
    assert patch(client, otto, 1, admin=False).json()["user"]["admin"] is False
    resp = patch(client, otto, second["id"], admin=False)
    status, reason, message = error(resp)
    assert (status, reason) == (400, "FailedPrecondition")
    assert "last active admin" in message
    assert "otto" in message
    # an inactive admin does not count as a way back in
    made = create(client, otto, "pia", admin=True)
    assert patch(client, otto, made["id"], active=False).status_code == 200
    assert error(patch(client, otto, second["id"], admin=False))[0] == 400


def test_non_admins_edit_only_their_own_display_name_and_password(
    client: TestClient, admin: Headers
) -> None:
    quinn = create(client, admin, "quinn")
    rose = create(client, admin, "rose")
    headers = login(client, "quinn", PASSWORD)
    resp = patch(client, headers, quinn["id"], displayName="Quinn Q")
    assert resp.status_code == 200
    assert resp.json()["user"]["displayName"] == "Quinn Q"
    for fields in (
        {"admin": True},
        {"active": False},
        {"username": "quinn2"},
        {"remote": True},
        {"agentUserGroup": {"agentUid": 1, "agentGid": 1, "agentUser": "u", "agentGroup": "g"}},
    ):
        resp = patch(client, headers, quinn["id"], **fields)
        assert error(resp)[:2] == (403, "PermissionDenied"), fields
        assert "only an admin" in error(resp)[2]
    others: list[dict[str, Any]] = [{"displayName": "Not Rose"}, {"password": "x"}]
    for other in others:
        resp = patch(client, headers, rose["id"], **other)
        assert error(resp)[:2] == (403, "PermissionDenied"), other
    # sending current values is a no-op, not a permission problem
    resp = patch(client, headers, quinn["id"], admin=False, active=True, username="quinn")
    assert resp.status_code == 200


def test_rename_and_edit_like_det_user_edit(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "sam")
    resp = patch(client, admin, made["id"], username="samuel", displayName="Sam S", admin=True)
    assert resp.status_code == 200, resp.text
    user = resp.json()["user"]
    assert (user["username"], user["displayName"], user["admin"]) == ("samuel", "Sam S", True)
    assert login_status(client, "samuel", PASSWORD) == (200, "")
    assert client.get("/api/v1/users/sam/by-username", headers=admin).status_code == 404
    resp = patch(client, admin, made["id"], username="ADMIN")
    assert error(resp)[:2] == (409, "AlreadyExists")
    resp = patch(client, admin, made["id"], username="bad name")
    assert error(resp)[:2] == (400, "InvalidArgument")
    cleared = patch(client, admin, made["id"], displayName="")
    assert cleared.json()["user"]["displayName"] == ""  # as Determined stores it
    resp = patch(client, admin, made["id"], displayName="Determined")
    assert error(resp)[0] == 400
    assert "too close" in error(resp)[2]
    empty = patch(client, admin, made["id"])
    assert empty.status_code == 200
    assert empty.json()["user"]["username"] == "samuel"


def test_link_and_unlink_agent_user(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "tess")
    group = {"agentUid": 1234, "agentGid": 99, "agentUser": "tess", "agentGroup": "users"}
    resp = patch(client, admin, made["id"], agentUserGroup=group)
    assert resp.json()["user"]["agentUserGroup"] == group
    again = client.get(f"/api/v1/users/{made['id']}", headers=admin).json()["user"]
    assert again["agentUserGroup"] == group
    bad = dict(group, agentUser="")
    assert error(patch(client, admin, made["id"], agentUserGroup=bad))[0] == 400
    negative = dict(group, agentUid=-1)
    assert error(patch(client, admin, made["id"], agentUserGroup=negative))[0] == 400
    resp = patch(client, admin, made["id"], agentUserGroup={})
    assert resp.json()["user"]["agentUserGroup"] is None


def test_remote_flag_disables_password_login(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "uma")
    session = login(client, "uma", PASSWORD)
    assert patch(client, admin, made["id"], remote=True).json()["user"]["remote"] is True
    assert client.get("/api/v1/me", headers=session).status_code == 401
    assert login_status(client, "uma", PASSWORD)[0] == 401
    assert error(patch(client, admin, made["id"], password="x"))[0] == 400
    assert error(patch(client, admin, made["id"], username="uma2"))[0] == 400
    back = patch(client, admin, made["id"], remote=False)
    assert back.json()["user"]["remote"] is False
    assert login_status(client, "uma", "")[0] == 401  # still no password until one is set
    patch(client, admin, made["id"], password=client_hash("New-Pa55"), isHashed=True)
    assert login_status(client, "uma", "New-Pa55") == (200, "")


# --- passwords ---


def test_change_password_like_det_user_change_password(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "vera")
    own = login(client, "vera", PASSWORD)
    other = login(client, "vera", PASSWORD)
    # User.change_password: PATCH {password: salt_and_hash(new), isHashed: true}
    resp = patch(client, own, made["id"], password=client_hash("Newer-Pa55"), isHashed=True)
    assert resp.status_code == 200
    assert login_status(client, "vera", PASSWORD) == (401, "invalid credentials")
    assert login_status(client, "vera", "Newer-Pa55") == (200, "")
    assert client.get("/api/v1/me", headers=own).status_code == 200  # the caller's session stays
    assert client.get("/api/v1/me", headers=other).status_code == 401  # the others end


def test_admin_changes_a_password_and_all_sessions_end(client: TestClient, admin: Headers) -> None:
    made = create(client, admin, "walt")
    session = login(client, "walt", PASSWORD)
    resp = patch(client, admin, made["id"], password="Plain-Pa55", isHashed=False)
    assert resp.status_code == 200
    assert client.get("/api/v1/me", headers=session).status_code == 401
    assert login_status(client, "walt", "Plain-Pa55") == (200, "")


def test_set_user_password_takes_the_bindings_bare_string(
    client: TestClient, admin: Headers
) -> None:
    made = create(client, admin, "xena")
    # bindings.post_SetUserPassword sends json=body where body is the (plain) password string
    resp = client.post(f"/api/v1/users/{made['id']}/password", json="Bare-Pa55", headers=admin)
    assert resp.status_code == 200, resp.text
    assert resp.json()["user"]["username"] == "xena"
    assert login_status(client, "xena", PASSWORD)[0] == 401
    assert login_status(client, "xena", "Bare-Pa55") == (200, "")
    own = login(client, "xena", "Bare-Pa55")
    body = {"password": client_hash("Object-Pa55"), "isHashed": True}
    resp = client.post(f"/api/v1/users/{made['id']}/password", json=body, headers=own)
    assert resp.status_code == 200
    assert login_status(client, "xena", "Object-Pa55") == (200, "")
    resp = client.post("/api/v1/users/1/password", json="hijack", headers=own)
    assert error(resp)[:2] == (403, "PermissionDenied")
    resp = client.post("/api/v1/users/999/password", json="x", headers=admin)
    assert error(resp)[0] == 404


# --- bulk (web UI) ---


def test_patch_users_reports_each_result(client: TestClient, admin: Headers) -> None:
    a = create(client, admin, "yann")
    b = create(client, admin, "zoe")
    session = login(client, "zoe", PASSWORD)
    resp = client.patch(
        "/api/v1/users",
        json={"userIds": [a["id"], b["id"], 1, 999], "activate": False},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    results = {r["id"]: r["error"] for r in resp.json()["results"]}
    assert results[a["id"]] == results[b["id"]] == ""
    assert "yourself" in results[1]
    assert "not found" in results[999]
    assert client.get("/api/v1/me", headers=session).status_code == 401
    listed = client.get("/api/v1/users", params={"active": "false"}, headers=admin).json()
    assert {u["username"] for u in listed["users"]} == {"yann", "zoe"}
    user = login(client, "determined")
    resp = client.patch(
        "/api/v1/users", json={"userIds": [a["id"]], "activate": True}, headers=user
    )
    assert "only an admin" in resp.json()["results"][0]["error"]


# --- PostgreSQL (skipped when it is unreachable, required under CI=true) ---


def test_users_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    settings = MasterSettings(home=tmp_path / "home", db=pg_url)
    with TestClient(create_app(settings, run_cluster=False)) as pg:
        admin = login(pg, "admin")
        create(pg, admin, "zed", displayName="Aaron")
        carl = create(pg, admin, "carl")
        resp = pg.post("/api/v1/users", json={"user": {"username": "CARL"}}, headers=admin)
        assert error(resp)[:2] == (409, "AlreadyExists")

        def names(**params: Any) -> list[str]:
            resp = pg.get("/api/v1/users", params=params, headers=admin)
            assert resp.status_code == 200, resp.text
            return [u["username"] for u in resp.json()["users"]]

        assert names(sortBy="SORT_BY_DISPLAY_NAME") == ["zed", "admin", "determined", "carl"]
        assert names(sortBy="SORT_BY_NAME", orderBy="ORDER_BY_DESC") == [
            "determined",
            "carl",
            "admin",
            "zed",
        ]
        assert names(name="AAR") == ["zed"]
        assert names(offset=-1) == ["carl"]
        session = login(pg, "carl", PASSWORD)
        assert patch(pg, admin, carl["id"], active=False).status_code == 200
        assert pg.get("/api/v1/me", headers=session).status_code == 401
        assert names(active="false") == ["carl"]
        assert error(patch(pg, admin, 1, active=False))[0] == 400
