"""Passwords: slow salted hashes (scrypt), upgraded on the next login; login rate limiting per
username and client address (429 with Retry-After and a clear message)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from stalwart.errors import TooManyRequestsError
from stalwart.master.app import create_app
from stalwart.master.db.tables import User
from stalwart.master.services.login_limits import LoginLimiter
from stalwart.master.services.passwords import client_hash, needs_rehash, verify_password
from tests.security.conftest import login, make_settings, make_user, state_of


def _stored(client: TestClient, username: str) -> str | None:
    with state_of(client).sessions() as session:
        user = session.query(User).filter_by(username=username).one()
        return user.password_hash


def _set_password(client: TestClient, admin: dict[str, str], user_id: int, pw: str) -> None:
    resp = client.post(f"/api/v1/users/{user_id}/password", json=pw, headers=admin)
    assert resp.status_code == 200, resp.text


def test_hashes_are_salted_scrypt(client: TestClient, admin: dict[str, str]) -> None:
    for name in ("alice", "bob"):
        _set_password(client, admin, make_user(client, admin, name), "Same-Password-1")
    alice, bob = _stored(client, "alice"), _stored(client, "bob")
    assert alice is not None
    assert bob is not None
    assert alice.startswith("scrypt$16384$8$1$")
    assert bob.startswith("scrypt$16384$8$1$")
    assert alice != bob  # a salt of its own each
    for stored in (alice, bob):
        assert "Same-Password-1" not in stored
        assert client_hash("Same-Password-1") not in stored
        assert verify_password(client_hash("Same-Password-1"), stored)
        assert not verify_password(client_hash("Same-Password-2"), stored)
    login(client, "alice", "Same-Password-1")


def _weak_hash(password: str) -> str:
    """A valid hash with weaker scrypt parameters than today's (an older master's)."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(client_hash(password).encode(), salt=salt, n=2**10, r=8, p=1, dklen=32)
    return f"scrypt$1024$8$1${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def test_an_older_hash_is_upgraded_at_the_next_login(
    client: TestClient, admin: dict[str, str]
) -> None:
    make_user(client, admin, "alice")
    with state_of(client).sessions() as session:
        user = session.query(User).filter_by(username="alice").one()
        user.password_hash = _weak_hash("Old-Password-1")
        session.commit()
    assert needs_rehash(_weak_hash("x"))
    login(client, "alice", "Old-Password-1")
    upgraded = _stored(client, "alice")
    assert upgraded is not None
    assert upgraded.startswith("scrypt$16384$8$1$")
    assert not needs_rehash(upgraded)
    login(client, "alice", "Old-Password-1")  # the same password still works


def _attempt(client: TestClient, username: str, password: str) -> tuple[int, dict[str, str], str]:
    resp = client.post(
        "/api/v1/auth/login",
        json={"username": username, "password": client_hash(password), "isHashed": True},
    )
    return resp.status_code, dict(resp.headers), str(resp.json().get("message", ""))


def test_logins_are_rate_limited_per_user_and_client(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path / "home", security={"login_max_failures": 3, "login_lockout": 300}
    )
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        _set_password(client, admin, make_user(client, admin, "alice"), "Right-Password-1")
        for _ in range(2):
            assert _attempt(client, "alice", "wrong")[0] == 401
        # a success clears the count
        login(client, "alice", "Right-Password-1")
        for _ in range(3):
            assert _attempt(client, "alice", "wrong")[0] == 401
        status, headers, message = _attempt(client, "alice", "Right-Password-1")
        assert status == 429
        assert 0 < int(headers["retry-after"]) <= 300
        assert "too many failed logins for user 'alice'" in message
        assert "try again in" in message
        # other users, and the same user from another address, are not locked out
        login(client, "admin")
        other = TestClient(client.app, client=("192.0.2.7", 50000))
        assert _attempt(other, "alice", "Right-Password-1")[0] == 200
        # unknown users are counted the same way (no hint that the name does not exist)
        for _ in range(3):
            assert _attempt(client, "nobody", "x")[0] == 401
        assert _attempt(client, "nobody", "x")[0] == 429


def test_the_lockout_ends_after_the_window() -> None:
    now = [1000.0]
    limiter = LoginLimiter(2, 60.0, clock=lambda: now[0])
    limiter.failed("alice", "10.0.0.1")
    now[0] += 30
    limiter.failed("Alice", "10.0.0.1")  # usernames without case
    with pytest.raises(TooManyRequestsError) as refused:
        limiter.check("alice", "10.0.0.1")
    assert refused.value.retry_after == 30
    limiter.check("alice", "10.0.0.2")
    now[0] += 30.5  # the first failure has left the window
    limiter.check("alice", "10.0.0.1")
    limiter.failed("alice", "10.0.0.1")
    with pytest.raises(TooManyRequestsError):
        limiter.check("alice", "10.0.0.1")
    limiter.succeeded("alice", "10.0.0.1")
    limiter.check("alice", "10.0.0.1")
