"""Tokens expire and can be revoked: logout, an admin ending a user's sessions, deactivation
(which also stops the user's tasks' allocation tokens)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.master.app import create_app
from stalwart.master.db.tables import UserSession
from tests.master.test_allocations_api import add_trial, create_experiment, task_headers
from tests.security.conftest import login, make_settings, make_user, state_of


def _age_sessions(client: TestClient, seconds: float) -> None:
    """Make every session ``seconds`` older (as if issued that long ago)."""
    delta = dt.timedelta(seconds=seconds)
    with state_of(client).sessions() as session:
        for row in session.scalars(select(UserSession)):
            row.created_at -= delta
            row.expires_at -= delta
        session.commit()


def test_a_token_expires_after_the_configured_lifetime(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", security={"token_lifetime": 600})
    with TestClient(create_app(settings, run_cluster=False)) as client:
        headers = login(client, "admin")
        assert client.get("/api/v1/me", headers=headers).status_code == 200
        _age_sessions(client, 599)
        assert client.get("/api/v1/me", headers=headers).status_code == 200
        _age_sessions(client, 2)
        resp = client.get("/api/v1/me", headers=headers)
        assert resp.status_code == 401
        assert "expired" in resp.json()["message"]
        assert "log in again" in resp.json()["message"]
        # logging in again gives a fresh token
        assert client.get("/api/v1/me", headers=login(client, "admin")).status_code == 200


def test_a_shorter_lifetime_applies_to_tokens_already_issued(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with TestClient(create_app(make_settings(home), run_cluster=False)) as client:
        headers = login(client, "admin")
        _age_sessions(client, 3600)
        assert client.get("/api/v1/me", headers=headers).status_code == 200
    shorter = make_settings(home, security={"token_lifetime": 1800})
    with TestClient(create_app(shorter, run_cluster=False)) as client:
        assert client.get("/api/v1/me", headers=headers).status_code == 401


def test_logout_revokes_the_token_only(client: TestClient) -> None:
    first = login(client, "admin")
    second = login(client, "admin")
    assert client.post("/api/v1/auth/logout", headers=first).status_code == 200
    assert client.get("/api/v1/me", headers=first).status_code == 401
    assert client.get("/api/v1/me", headers=second).status_code == 200


def test_an_admin_revokes_every_session_of_a_user(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice_id = make_user(client, admin, "alice")
    make_user(client, admin, "bob")
    alice = [login(client, "alice"), login(client, "alice")]
    bob = login(client, "bob")
    refused = client.delete(f"/api/v1/users/{alice_id}/sessions", headers=bob)
    assert refused.status_code == 403
    assert "only an admin" in refused.json()["message"]
    resp = client.delete(f"/api/v1/users/{alice_id}/sessions", headers=admin)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"revoked": 2}
    for headers in alice:
        assert client.get("/api/v1/me", headers=headers).status_code == 401
    assert client.get("/api/v1/me", headers=bob).status_code == 200
    assert client.get("/api/v1/me", headers=admin).status_code == 200
    # alice may log in again, and end her own sessions herself
    again = login(client, "alice")
    assert client.delete(f"/api/v1/users/{alice_id}/sessions", headers=again).status_code == 200
    assert client.get("/api/v1/me", headers=again).status_code == 401
    missing = client.delete("/api/v1/users/9999/sessions", headers=admin)
    assert missing.status_code == 404


def test_deactivating_a_user_revokes_their_tokens_and_their_tasks(
    client: TestClient, admin: dict[str, str]
) -> None:
    alice_id = make_user(client, admin, "alice")
    alice = login(client, "alice")
    env = add_trial(state_of(client), create_experiment(client, alice))
    task = task_headers(env.token)
    assert client.get("/api/v1/me", headers=task).json()["user"]["username"] == "alice"
    resp = client.patch(f"/api/v1/users/{alice_id}", json={"active": False}, headers=admin)
    assert resp.status_code == 200, resp.text
    assert client.get("/api/v1/me", headers=alice).status_code == 401
    stopped = client.get("/api/v1/me", headers=task)
    assert stopped.status_code == 401
    assert "not active" in stopped.json()["message"]
    relogin = client.post(
        "/api/v1/auth/login", json={"username": "alice", "password": "", "isHashed": True}
    )
    assert relogin.status_code == 403
    assert relogin.json()["message"] == "user is not active"
    client.patch(f"/api/v1/users/{alice_id}", json={"active": True}, headers=admin)
    assert client.get("/api/v1/me", headers=task).status_code == 200
