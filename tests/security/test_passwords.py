"""Passwords: slow salted hashes (argon2id; older scrypt ones and Determined's bcrypt ones
upgraded on the next login), the same work for every login, a minimum length; login rate
limiting per username and client address (429 with Retry-After and a clear message), kept in
the database."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.errors import TooManyRequestsError
from stalwart.master.app import create_app
from stalwart.master.db import migrate
from stalwart.master.db.engine import SessionFactory, make_engine, make_session_factory
from stalwart.master.db.tables import LoginFailure, User
from stalwart.master.services import passwords
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


def test_hashes_are_salted_argon2id(client: TestClient, admin: dict[str, str]) -> None:
    for name in ("alice", "bob"):
        _set_password(client, admin, make_user(client, admin, name), "Same-Password-1")
    alice, bob = _stored(client, "alice"), _stored(client, "bob")
    assert alice is not None
    assert bob is not None
    assert alice.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert bob.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert alice != bob  # a salt of its own each
    for stored in (alice, bob):
        assert "Same-Password-1" not in stored
        assert client_hash("Same-Password-1") not in stored
        assert verify_password(client_hash("Same-Password-1"), stored)
        assert not verify_password(client_hash("Same-Password-2"), stored)
        assert not verify_password("", stored)
        assert not needs_rehash(stored)
    login(client, "alice", "Same-Password-1")


def _scrypt_hash(password: str, n: int = 2**14) -> str:
    """A hash as an older master stored it (scrypt; N=2^14 was its default)."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(client_hash(password).encode(), salt=salt, n=n, r=8, p=1, dklen=32)
    return f"scrypt${n}$8$1${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


@pytest.mark.parametrize("n", [2**14, 2**10])
def test_an_older_scrypt_hash_logs_in_and_is_rehashed_to_argon2id(
    client: TestClient, admin: dict[str, str], n: int
) -> None:
    make_user(client, admin, "alice")
    with state_of(client).sessions() as session:
        user = session.query(User).filter_by(username="alice").one()
        user.password_hash = _scrypt_hash("Old-Password-1", n)
        session.commit()
    assert needs_rehash(_scrypt_hash("x", n))
    assert _attempt(client, "alice", "Wrong-Password-1")[0] == 401
    assert str(_stored(client, "alice")).startswith("scrypt$")
    login(client, "alice", "Old-Password-1")
    upgraded = _stored(client, "alice")
    assert upgraded is not None
    assert upgraded.startswith("$argon2id$")
    assert not needs_rehash(upgraded)
    login(client, "alice", "Old-Password-1")  # the same password still works
    assert _stored(client, "alice") == upgraded  # and is not hashed again
    assert _attempt(client, "alice", "Wrong-Password-1")[0] == 401


def _determined_hash(password: str, rounds: int) -> str:
    """A hash as Determined 0.38 stores it: bcrypt of the first 72 bytes of the client hash,
    with Go's ``$2a$`` prefix (Determined's cost is 15; older releases used 10)."""
    digest = bcrypt.hashpw(client_hash(password).encode()[:72], bcrypt.gensalt(rounds=rounds))
    return "$2a$" + digest.decode()[4:]


@pytest.mark.parametrize("rounds", [4, 10])
def test_a_determined_bcrypt_hash_logs_in_and_is_rehashed_to_argon2id(
    client: TestClient, admin: dict[str, str], rounds: int
) -> None:
    """Users imported from Determined (``stalwart import determined``) keep their password."""
    make_user(client, admin, "alice")
    with state_of(client).sessions() as session:
        user = session.query(User).filter_by(username="alice").one()
        user.password_hash = _determined_hash("Old-Password-1", rounds)
        session.commit()
    assert needs_rehash(_determined_hash("x", rounds))
    assert _attempt(client, "alice", "Wrong-Password-1")[0] == 401
    assert _attempt(client, "alice", "")[0] == 401
    assert str(_stored(client, "alice")).startswith("$2a$")
    login(client, "alice", "Old-Password-1")
    upgraded = _stored(client, "alice")
    assert upgraded is not None
    assert upgraded.startswith("$argon2id$")
    login(client, "alice", "Old-Password-1")
    assert _stored(client, "alice") == upgraded


def test_every_login_runs_the_password_hash_once(
    client: TestClient, admin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No timing oracle: an unknown user, a user without a password and a remote user cost one
    argon2 verification each, like a real account (the code path, not the clock)."""
    _set_password(client, admin, make_user(client, admin, "alice"), "Right-Password-1")
    make_user(client, admin, "nopass")  # no password: logs in with the empty one
    remote = make_user(client, admin, "rita")
    resp = client.patch(f"/api/v1/users/{remote}", json={"remote": True}, headers=admin)
    assert resp.status_code == 200, resp.text
    calls: list[str] = []
    real = passwords._argon2_verify

    def counting(stored: str, hashed: str) -> bool:
        calls.append(stored)
        return real(stored, hashed)

    monkeypatch.setattr(passwords, "_argon2_verify", counting)
    cases = [
        ("alice", "Right-Password-1", 200),
        ("alice", "Wrong-Password-1", 401),
        ("alice", "", 401),
        ("nobody", "Any-Password-1", 401),
        ("nobody", "", 401),
        ("nopass", "", 200),
        ("nopass", "Any-Password-1", 401),
        ("rita", "", 401),
        ("rita", "Any-Password-1", 401),
    ]
    for username, password, status in cases:
        calls.clear()
        assert _attempt(client, username, password)[0] == status, (username, password)
        assert len(calls) == 1, (username, password, calls)


def test_a_password_must_have_the_minimum_length(client: TestClient, admin: dict[str, str]) -> None:
    alice = make_user(client, admin, "alice")  # created without a password: allowed, as before
    login(client, "alice", "")
    for body in ("", "Short-1", {"password": "", "isHashed": True}):
        resp = client.post(f"/api/v1/users/{alice}/password", json=body, headers=admin)
        assert resp.status_code == 400, body
        message = resp.json()["message"]
        assert "at least 8 characters" in message
        assert "security.min_password_length" in message
    patch = client.patch(f"/api/v1/users/{alice}", json={"password": ""}, headers=admin)
    assert patch.status_code == 400
    made = client.post(
        "/api/v1/users",
        json={"user": {"username": "bob", "active": True}, "password": "Short-1"},
        headers=admin,
    )
    assert made.status_code == 400
    assert "at least 8 characters" in made.json()["message"]
    login(client, "alice", "")  # nothing changed
    _set_password(client, admin, alice, "Eight-81")
    login(client, "alice", "Eight-81")
    # the built-in users' empty initial password still works until it is changed
    own = login(client, "admin", "")
    resp = client.post("/api/v1/users/1/password", json="", headers=own)
    assert resp.status_code == 400
    login(client, "admin", "")


def test_the_minimum_length_is_a_master_setting(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", security={"min_password_length": 12})
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        alice = make_user(client, admin, "alice")
        resp = client.post(f"/api/v1/users/{alice}/password", json="Eleven-Ch1", headers=admin)
        assert resp.status_code == 400
        assert "at least 12 characters" in resp.json()["message"]
        _set_password(client, admin, alice, "Twelve-Char1")
    settings = make_settings(tmp_path / "home2", security={"min_password_length": 0})
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        _set_password(client, admin, 1, "")  # 0: no minimum, the empty password included
        login(client, "admin", "")


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


@pytest.fixture
def limiter_db(tmp_path: Path) -> Iterator[SessionFactory]:
    """Sessions on a migrated SQLite database."""
    engine = make_engine(f"sqlite:///{tmp_path / 'limits.db'}")
    migrate.upgrade(engine)
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


def _failure_rows(sessions: SessionFactory) -> list[tuple[str, str]]:
    with sessions() as session:
        rows = session.execute(select(LoginFailure.username, LoginFailure.address)).all()
        return [(row[0], row[1]) for row in rows]


def test_the_lockout_ends_after_the_window(limiter_db: SessionFactory) -> None:
    now = [1_000_000.0]
    limiter = LoginLimiter(limiter_db, 2, 60.0, clock=lambda: now[0])
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
    assert _failure_rows(limiter_db) == []


def test_expired_failures_are_deleted(limiter_db: SessionFactory) -> None:
    now = [1_000_000.0]
    limiter = LoginLimiter(limiter_db, 3, 60.0, clock=lambda: now[0])
    for i in range(5):
        limiter.failed(f"user{i}", "10.0.0.1")
    assert len(_failure_rows(limiter_db)) == 5
    now[0] += 61  # all of them left the window; the next failure sweeps them away
    limiter.failed("eve", "10.0.0.9")
    assert _failure_rows(limiter_db) == [("eve", "10.0.0.9")]
    # a second limiter (another master) on the same database sees the same counts
    other = LoginLimiter(limiter_db, 2, 60.0, clock=lambda: now[0])
    other.failed("EVE", "10.0.0.9")
    with pytest.raises(TooManyRequestsError):
        other.check("eve", "10.0.0.9")  # one failure counted by each
    limiter.check("eve", "10.0.0.9")  # (its own limit is 3)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_the_lockout_holds_across_a_master_restart(
    tmp_path: Path, request: pytest.FixtureRequest, database: str
) -> None:
    db = request.getfixturevalue("pg_url") if database == "postgresql" else None
    settings = make_settings(
        tmp_path / "home", db=db, security={"login_max_failures": 3, "login_lockout": 300}
    )
    with TestClient(create_app(settings, run_cluster=False)) as first:
        admin = login(first, "admin")
        _set_password(first, admin, make_user(first, admin, "alice"), "Right-Password-1")
        for _ in range(2):
            assert _attempt(first, "alice", "wrong")[0] == 401
    # a fresh master on the same database: the two failures still count
    with TestClient(create_app(settings, run_cluster=False)) as second:
        assert _attempt(second, "alice", "wrong")[0] == 401
        status, headers, message = _attempt(second, "alice", "Right-Password-1")
        assert status == 429
        assert 0 < int(headers["retry-after"]) <= 300
        assert "too many failed logins for user 'alice'" in message
        # and while it runs, a second master on the same database refuses as well
        with TestClient(create_app(settings, run_cluster=False)) as third:
            assert _attempt(third, "alice", "Right-Password-1")[0] == 429
            assert _attempt(third, "admin", "")[0] == 200
