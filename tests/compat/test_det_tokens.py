"""Access tokens with the official ``det`` CLI (0.38.1) and its bindings, against a real master.

What users rely on: ``det token create`` prints a token once; ``list``, ``describe``, ``edit`` and
``revoke`` manage one's own tokens (an admin's: everyone's); ``det token login TOKEN`` makes a
fresh client act as the token's user, as does ``DET_USER`` + ``DET_USER_TOKEN`` in the
environment; a revoked or expired token is refused with a message that says so; another user
cannot revoke one's token.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.compat.conftest import Det, MasterProcess, describe, det_at, logged_in_admin

pytestmark = pytest.mark.compat

PASSWORD = "Token-test-pass-1"
WAIT_S = 30.0


def _user_cli(det_venv: Path, master: MasterProcess, home: Path, name: str) -> Det:
    cli = det_at(det_venv, master, home)
    cli.login(name, PASSWORD)
    return cli


@pytest.fixture(scope="module")
def users(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Det]:
    """The admin, and two users ``alice`` and ``bob``, each logged in with a CLI of their own."""
    admin = logged_in_admin(det_venv, stalwart_master, tmp_path_factory)
    clis = {"admin": admin}
    for name in ("alice", "bob"):
        admin.ok("user", "create", name, "--password", PASSWORD)
        clis[name] = _user_cli(det_venv, stalwart_master, tmp_path_factory.mktemp(name), name)
    return clis


def _created(done: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    found = re.search(r"TokenID: (\d+)\nAccess-Token: (\S+)", done.stdout)
    assert found, describe(done)
    return int(found.group(1)), found.group(2)


def _me(master: MasterProcess, token: str) -> httpx.Response:
    return httpx.get(
        f"{master.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def _listed(cli: Det, *args: str) -> list[dict[str, object]]:
    data = json.loads(cli.ok("token", "list", *args, "--json").stdout)
    assert isinstance(data, list)
    return data


def test_create_list_describe_edit_and_login_with_a_token(
    users: dict[str, Det], det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    alice = users["alice"]
    token_id, token = _created(alice.ok("token", "create", "-e", "2", "-d", "laptop"))
    listed = _listed(alice)
    assert [(t["id"], t["description"], t["revoked"]) for t in listed] == [
        (token_id, "laptop", False)
    ]
    assert listed[0]["tokenType"] == "TOKEN_TYPE_ACCESS_TOKEN"
    table = alice.ok("token", "describe", str(token_id)).stdout
    assert "laptop" in table
    assert "ACCESS_TOKEN" in table
    alice.ok("token", "edit", str(token_id), "-d", "work laptop")
    described = json.loads(alice.ok("token", "describe", str(token_id), "--json").stdout)
    assert described[0]["description"] == "work laptop"

    fresh = det_at(det_venv, stalwart_master, tmp_path / "fresh")
    done = fresh.ok("token", "login", token)
    assert "Authenticated as alice." in done.stdout
    assert "logged in as user 'alice'" in fresh.ok("user", "whoami").stdout
    # the admin sees alice's token; bob does not
    assert token_id in [t["id"] for t in _listed(users["admin"])]
    assert token_id in [t["id"] for t in _listed(users["admin"], "alice")]
    assert token_id not in [t["id"] for t in _listed(users["bob"])]
    refused = users["bob"].run("token", "list", "alice")
    assert refused.returncode != 0, describe(refused)


def test_a_revoked_token_is_refused_and_only_its_owner_or_an_admin_revokes(
    users: dict[str, Det], det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    alice = users["alice"]
    token_id, token = _created(alice.ok("token", "create"))
    fresh = det_at(det_venv, stalwart_master, tmp_path / "fresh")
    fresh.ok("token", "login", token)
    assert "alice" in fresh.ok("user", "whoami").stdout

    by_bob = users["bob"].run("token", "revoke", str(token_id))
    assert by_bob.returncode != 0, describe(by_bob)
    assert "alice" in fresh.ok("user", "whoami").stdout  # still works

    done = alice.ok("token", "revoke", str(token_id))
    assert f"Successfully revoked token {token_id}." in done.stdout
    after = fresh.run("user", "whoami")
    assert after.returncode != 0, describe(after)
    assert token_id not in [t["id"] for t in _listed(alice)]
    inactive = [t for t in _listed(alice, "--show-inactive") if t["id"] == token_id]
    assert inactive
    assert inactive[0]["revoked"] is True
    # det shows its own "Unauthenticated" line; the master's answer says why
    env = {"DET_USER": "alice", "DET_USER_TOKEN": token}
    plain = det_at(det_venv, stalwart_master, tmp_path / "env").run("user", "whoami", extra_env=env)
    assert plain.returncode != 0, describe(plain)
    assert "Unauthenticated" in plain.stderr, describe(plain)
    answer = _me(stalwart_master, token)
    assert answer.status_code == 401
    assert f"access token {token_id} was revoked" in answer.text

    # an admin revokes anyone's
    other_id, _ = _created(alice.ok("token", "create"))
    users["admin"].ok("token", "revoke", str(other_id))
    assert other_id not in [t["id"] for t in _listed(alice)]


SDK_SCRIPT = """
import sys
from determined.common import api
from determined.common.api import authentication, bindings
master, password, lifespan = sys.argv[1:4]
sess = authentication.login(master, "bob", password)
me = bindings.get_GetMe(sess).user
made = bindings.post_PostAccessToken(
    sess, body=bindings.v1PostAccessTokenRequest(userId=me.id, lifespan=lifespan)
)
print(made.tokenId, made.token)
"""


def test_an_expired_token_is_refused_and_env_tokens_work(
    users: dict[str, Det], det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    """A token made through the official bindings with a lifespan of two seconds works from
    ``DET_USER_TOKEN`` at once and is refused, saying it expired, once the two seconds pass."""
    done = subprocess.run(
        [str(det_venv / "bin" / "python"), "-c", SDK_SCRIPT, stalwart_master.url, PASSWORD, "2s"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    token_id, token = done.stdout.split()
    cli = det_at(det_venv, stalwart_master, tmp_path / "env")
    env = {"DET_USER": "bob", "DET_USER_TOKEN": token}
    first = cli.run("user", "whoami", extra_env=env)
    assert first.returncode == 0, describe(first)
    assert "'bob'" in first.stdout, describe(first)
    deadline = time.monotonic() + WAIT_S
    while True:  # the lifespan is the master's to count: poll until it says expired
        later = cli.run("user", "whoami", extra_env=env)
        if later.returncode != 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert later.returncode != 0, describe(later)
    answer = _me(stalwart_master, token)
    assert answer.status_code == 401
    assert f"access token {token_id} expired at" in answer.text
    bad = subprocess.run(
        [str(det_venv / "bin" / "python"), "-c", SDK_SCRIPT, stalwart_master.url, PASSWORD, "-3h"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode != 0, bad.stdout
    assert "lifespan" in bad.stderr, bad.stderr
