"""Access tokens through the REST API (``/api/v1/tokens``) on an in-process master whose clock
is a :class:`~stalwart.master.clock.ManualClock`: expiry is reached by moving the clock."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stalwart.errors import InvalidArgumentError
from stalwart.master.clock import ManualClock
from stalwart.master.services.access_tokens import DEFAULT_LIFESPAN, MAX_LIFESPAN, parse_lifespan
from tests.master.conftest import login


@pytest.fixture
def clock(client: TestClient) -> ManualClock:
    manual = ManualClock()
    client.app.state.master.clock = manual  # type: ignore[attr-defined]
    return manual


def _user(client: TestClient, admin: dict[str, str], name: str) -> tuple[int, dict[str, str]]:
    made = client.post(
        "/api/v1/users",
        json={"user": {"username": name, "active": True}, "password": "", "isHashed": False},
        headers=admin,
    )
    assert made.status_code == 200, made.text
    return int(made.json()["user"]["id"]), login(client, name)


def _create(
    client: TestClient, headers: dict[str, str], user_id: int, **extra: object
) -> dict[str, Any]:
    resp = client.post("/api/v1/tokens", json={"userId": user_id, **extra}, headers=headers)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_parse_lifespan() -> None:
    assert parse_lifespan(None) == DEFAULT_LIFESPAN
    assert parse_lifespan("720h") == dt.timedelta(days=30)
    assert parse_lifespan("1h30m") == dt.timedelta(minutes=90)
    assert parse_lifespan("1.5s") == dt.timedelta(seconds=1.5)
    assert parse_lifespan("-1") == MAX_LIFESPAN
    for bad in ("-5h", "abc", "5", "h", "5d"):
        with pytest.raises(InvalidArgumentError):
            parse_lifespan(bad)


def test_a_token_signs_requests_until_revoked(
    client: TestClient, admin: dict[str, str], clock: ManualClock
) -> None:
    uid, alice = _user(client, admin, "alice")
    made = _create(client, alice, uid, description="ci")
    token, token_id = made["token"], made["tokenId"]
    me = client.get("/api/v1/me", headers=_bearer(token))
    assert me.status_code == 200
    assert me.json()["user"]["username"] == "alice"
    listed = client.get("/api/v1/tokens", headers=alice).json()["tokenInfo"]
    assert [(t["id"], t["userId"], t["description"], t["revoked"]) for t in listed] == [
        (token_id, uid, "ci", False)
    ]
    assert listed[0]["tokenType"] == "TOKEN_TYPE_ACCESS_TOKEN"
    # logging out with it does not end it
    assert client.post("/api/v1/auth/logout", headers=_bearer(token)).status_code == 200
    assert client.get("/api/v1/me", headers=_bearer(token)).status_code == 200
    revoked = client.patch(
        f"/api/v1/tokens/{token_id}",
        json={"tokenId": str(token_id), "setRevoked": True},
        headers=alice,
    )
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["tokenInfo"]["revoked"] is True
    refused = client.get("/api/v1/me", headers=_bearer(token))
    assert refused.status_code == 401
    assert f"access token {token_id} was revoked" in refused.text
    assert client.get("/api/v1/tokens", headers=alice).json()["tokenInfo"] == []
    inactive = client.get("/api/v1/tokens?showInactive=true", headers=alice).json()["tokenInfo"]
    assert [t["id"] for t in inactive] == [token_id]
    again = client.patch(f"/api/v1/tokens/{token_id}", json={"setRevoked": True}, headers=alice)
    assert again.status_code == 400, again.text


def test_a_token_expires_with_the_clock(
    client: TestClient, admin: dict[str, str], clock: ManualClock
) -> None:
    uid, alice = _user(client, admin, "alice")
    made = _create(client, alice, uid, lifespan="2h")
    assert client.get("/api/v1/me", headers=_bearer(made["token"])).status_code == 200
    clock.advance(2 * 3600 + 1)
    refused = client.get("/api/v1/me", headers=_bearer(made["token"]))
    assert refused.status_code == 401
    assert f"access token {made['tokenId']} expired at" in refused.text
    bad = client.post("/api/v1/tokens", json={"userId": uid, "lifespan": "-3h"}, headers=alice)
    assert bad.status_code == 400, bad.text


def test_users_manage_their_own_tokens_and_admins_everyones(
    client: TestClient, admin: dict[str, str], clock: ManualClock
) -> None:
    alice_id, alice = _user(client, admin, "alice")
    bob_id, bob = _user(client, admin, "bob")
    alices = _create(client, alice, alice_id)["tokenId"]
    # bob cannot make, see, edit or revoke alice's tokens
    made = client.post("/api/v1/tokens", json={"userId": alice_id}, headers=bob)
    assert made.status_code == 403, made.text
    assert client.get("/api/v1/tokens?username=alice", headers=bob).status_code == 403
    assert client.get("/api/v1/tokens", headers=bob).json()["tokenInfo"] == []
    revoke = client.patch(f"/api/v1/tokens/{alices}", json={"setRevoked": True}, headers=bob)
    assert revoke.status_code == 403, revoke.text
    assert (
        client.patch("/api/v1/tokens/999", json={"setRevoked": True}, headers=bob).status_code
        == 404
    )
    # an admin makes one for bob, sees all, edits and revokes alice's
    bobs = _create(client, admin, bob_id, description="made by admin")
    ids = {t["id"] for t in client.get("/api/v1/tokens", headers=admin).json()["tokenInfo"]}
    assert ids == {alices, bobs["tokenId"]}
    assert [t["id"] for t in client.get("/api/v1/tokens", headers=bob).json()["tokenInfo"]] == [
        bobs["tokenId"]
    ]
    edited = client.patch(f"/api/v1/tokens/{alices}", json={"description": "x"}, headers=admin)
    assert edited.json()["tokenInfo"]["description"] == "x"
    described = client.get(f"/api/v1/tokens?tokenIds={alices}", headers=admin).json()
    assert [t["description"] for t in described["tokenInfo"]] == ["x"]
    # ending all of bob's sessions revokes his tokens too
    assert client.delete(f"/api/v1/users/{bob_id}/sessions", headers=admin).status_code == 200
    assert client.get("/api/v1/me", headers=_bearer(bobs["token"])).status_code == 401
