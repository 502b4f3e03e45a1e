"""The official ``det`` CLI with Stalwart's security rules (docs/security.md): a revoked or
expired token makes it log in again, and a locked-out login shows the master's message."""

from __future__ import annotations

import httpx

from stalwart.master.services.passwords import client_hash
from tests.compat.conftest import Det, describe


def _token(det: Det, username: str, password: str = "") -> str:
    resp = httpx.post(
        f"{det.master.url}/api/v1/auth/login",
        json={"username": username, "password": client_hash(password), "isHashed": True},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    token: str = resp.json()["token"]
    return token


def test_a_revoked_token_makes_det_log_in_again(det: Det) -> None:
    det.login("admin", "")
    admin = {"Authorization": f"Bearer {_token(det, 'admin')}"}
    resp = httpx.delete(f"{det.master.url}/api/v1/users/1/sessions", headers=admin, timeout=30)
    assert resp.status_code == 200, resp.text
    # the cached token answers 401: det drops it and asks for admin's password again
    done = det.ok("user", "whoami", stdin="\n")
    assert "You are logged in as user 'admin'" in done.stdout, describe(done)


def test_a_locked_out_login_shows_why(det: Det) -> None:
    admin = {"Authorization": f"Bearer {_token(det, 'admin')}"}
    created = httpx.post(
        f"{det.master.url}/api/v1/users",
        json={"user": {"username": "lockme", "active": True}, "password": "Right-Pass-1"},
        headers=admin,
        timeout=30,
    )
    assert created.status_code == 200, created.text
    for _ in range(5):
        done = det.run("user", "login", "lockme", stdin="wrong\n")
        assert done.returncode != 0, describe(done)
    done = det.run("user", "login", "lockme", stdin="Right-Pass-1\n")
    assert done.returncode != 0, describe(done)
    assert "too many failed logins" in done.stdout + done.stderr, describe(done)
