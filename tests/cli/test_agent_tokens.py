"""``stalwart agent tokens`` and ``stalwart agent revoke`` against a real master and agent.

The package's agent (``a1``, started by :class:`~stalwart.local.LocalCluster` with the master's
``agent_token`` file) enrolled at its first sync: its own token is in its home. The revocations
here are of an agent id enrolled by hand, so the package's agent keeps running.
"""

from __future__ import annotations

import json
import stat

import httpx

from stalwart.agent.protocol import AGENT_TOKEN_HEADER
from stalwart.local import LocalCluster
from stalwart.master.services.passwords import client_hash
from tests.cli.conftest import Cli, one_error_line


def _sync(cluster: LocalCluster, agent_id: str, token: str) -> httpx.Response:
    return httpx.post(
        f"{cluster.url}/api/v1/agents/{agent_id}/sync",
        json={},
        headers={AGENT_TOKEN_HEADER: token},
        timeout=10.0,
    )


def test_the_local_agent_enrolled_and_keeps_its_token_private(
    cli: Cli, cluster: LocalCluster
) -> None:
    stored = cluster.agent_home("a1") / "agent_token"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    enrollment = (cluster.home / "agent_token").read_text().strip()
    assert stored.read_text().strip() != enrollment
    listed = cli("agent", "tokens", "--json")
    assert listed.code == 0, listed.err
    (row,) = [row for row in json.loads(listed.out) if row["agentId"] == "a1"]
    assert row["confirmedAt"]
    assert row["revokedAt"] is None
    assert stored.read_text().strip() not in listed.out
    shown = cli("agent", "tokens")
    assert shown.code == 0, shown.err
    assert "a1" in shown.out
    assert "First used" in shown.out


def test_revoke_forbids_then_reenroll_allows_the_agent_id(cli: Cli, cluster: LocalCluster) -> None:
    enrollment = (cluster.home / "agent_token").read_text().strip()
    token = _sync(cluster, "cli-spare", enrollment).json()["agent_token"]
    assert _sync(cluster, "cli-spare", token).status_code == 200
    revoked = cli("agent", "revoke", "cli-spare")
    assert revoked.code == 0, revoked.err
    assert "refused until `stalwart agent revoke cli-spare --reenroll`" in revoked.out
    for presented in (token, enrollment):
        assert _sync(cluster, "cli-spare", presented).status_code == 401
    assert "cli-spare" in cli("agent", "tokens").out
    allowed = cli("agent", "revoke", "cli-spare", "--reenroll")
    assert allowed.code == 0, allowed.err
    assert "may enroll again" in allowed.out
    again = _sync(cluster, "cli-spare", enrollment)
    assert again.status_code == 200, again.text
    assert again.json()["agent_token"] not in (None, token)
    _disable(cluster, "cli-spare")  # the package's other tests must not place work on it


def _disable(cluster: LocalCluster, agent_id: str) -> None:
    """Disable a hand-enrolled agent: it runs nothing, and zero-slot tasks may go anywhere."""
    login = httpx.post(
        f"{cluster.url}/api/v1/auth/login",
        json={"username": "admin", "password": client_hash(""), "isHashed": True},
        timeout=10.0,
    )
    assert login.status_code == 200, login.text
    done = httpx.post(
        f"{cluster.url}/api/v1/agents/{agent_id}/disable",
        json={"drain": False},
        headers={"Authorization": f"Bearer {login.json()['token']}"},
        timeout=10.0,
    )
    assert done.status_code == 200, done.text


def test_revoking_an_unknown_agent_is_one_line(cli: Cli) -> None:
    result = cli("agent", "revoke", "nobody")
    assert result.code == 1
    assert "agent 'nobody' has no credential" in one_error_line(result.err)
