"""Agents' own tokens, over HTTP through the master's app (its real database; no mocks).

The cluster's agent token only enrolls an agent id without a credential; the agent then syncs
with a token of its own, which admins can revoke to forbid the id or to let it enroll again.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from stalwart.agent.protocol import AGENT_TOKEN_HEADER
from stalwart.master.app import create_app
from stalwart.master.db.tables import Agent, AgentCredential
from stalwart.master.state import agent_key
from tests.master.test_allocations_api import live_server
from tests.security.conftest import login, make_settings, make_user, state_of

BODY = {"slots": [{"id": "0", "device_type": "cpu"}], "containers": []}


def _sync(client: httpx.Client, agent_id: str, token: str, **extra: Any) -> httpx.Response:
    return client.post(
        f"/api/v1/agents/{agent_id}/sync",
        json={**BODY, **extra},
        headers={AGENT_TOKEN_HEADER: token},
    )


def _enrollment(client: TestClient) -> str:
    return state_of(client).agent_token


def _enroll(client: TestClient, agent_id: str) -> str:
    """Enroll and confirm ``agent_id`` (its first sync with its own token); the token."""
    answer = _sync(client, agent_id, _enrollment(client))
    assert answer.status_code == 200, answer.text
    token = str(answer.json()["agent_token"])
    assert _sync(client, agent_id, token).status_code == 200
    return token


def _credential(client: TestClient, agent_id: str) -> AgentCredential | None:
    with state_of(client).sessions() as session:
        row = session.get(AgentCredential, agent_id)
        if row is not None:
            session.expunge(row)
        return row


def _refused(resp: httpx.Response, status: int, *words: str) -> None:
    assert resp.status_code == status, resp.text
    message = resp.json()["message"]
    for word in words:
        assert word in message, message


def test_enrolling_answers_the_token_once_and_the_master_keeps_only_its_hash(
    client: TestClient,
) -> None:
    answer = _sync(client, "n1", _enrollment(client), wait_seconds=30)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    token = got["agent_token"]
    assert isinstance(token, str)
    assert len(token) >= 43
    assert got["start"] == got["kill"] == got["forget"] == []
    row = _credential(client, "n1")
    assert row is not None
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(vars(row))
    assert row.confirmed_at is None
    assert row.revoked_at is None
    with state_of(client).sessions() as session:
        assert session.get(Agent, "n1") is None  # the enrolling sync registered nothing
    # The agent's own token registers it and is never sent again.
    first = _sync(client, "n1", token)
    assert first.status_code == 200, first.text
    assert first.json()["agent_token"] is None
    with state_of(client).sessions() as session:
        assert session.get(Agent, "n1") is not None
    confirmed = _credential(client, "n1")
    assert confirmed is not None
    assert confirmed.confirmed_at is not None
    assert _sync(client, "n1", token).json()["agent_token"] is None


def test_the_enrollment_token_no_longer_opens_an_enrolled_agent_id(client: TestClient) -> None:
    _enroll(client, "n1")
    _refused(
        _sync(client, "n1", _enrollment(client)),
        401,
        "enrolled already",
        "<agent home>/agent_token",
        "stalwart agent revoke n1 --reenroll",
    )


def test_another_agents_token_and_wrong_tokens_are_refused(client: TestClient) -> None:
    mine, theirs = _enroll(client, "mine"), _enroll(client, "theirs")
    _refused(_sync(client, "mine", theirs), 401, "invalid agent token for agent 'mine'")
    _refused(_sync(client, "theirs", mine), 401, "invalid agent token")
    _refused(_sync(client, "new", theirs), 401, "invalid agent token")  # not an enrollment token
    _refused(_sync(client, "mine", "x" * 43), 401, "invalid agent token")
    _refused(_sync(client, "mine", ""), 401, "invalid agent token")
    assert _sync(client, "mine", mine).status_code == 200


def test_an_enrollment_answer_lost_on_the_way_locks_no_one_out(client: TestClient) -> None:
    """Until the agent has used its token once, the enrollment token enrolls the id again
    (the first token is replaced)."""
    lost = _sync(client, "n1", _enrollment(client)).json()["agent_token"]
    again = _sync(client, "n1", _enrollment(client)).json()["agent_token"]
    assert again != lost
    _refused(_sync(client, "n1", lost), 401, "invalid agent token")
    assert _sync(client, "n1", again).status_code == 200


def test_a_forbidden_agent_is_refused_with_both_tokens(
    client: TestClient, admin: dict[str, str]
) -> None:
    token = _enroll(client, "n1")
    other = _enroll(client, "n2")
    revoked = client.delete("/api/v1/agents/n1/token", headers=admin)
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["agentId"] == "n1"
    assert revoked.json()["reenroll"] is False
    assert revoked.json()["revokedAt"]
    for presented in (token, _enrollment(client)):
        _refused(
            _sync(client, "n1", presented),
            401,
            "agent 'n1' was revoked by an admin",
            "stalwart agent revoke n1 --reenroll",
        )
    assert _sync(client, "n2", other).status_code == 200  # only that agent
    again = client.delete("/api/v1/agents/n1/token", headers=admin)  # idempotent, time kept
    assert again.json()["revokedAt"] == revoked.json()["revokedAt"]
    listed = client.get("/api/v1/agents/tokens", headers=admin)
    assert listed.status_code == 200, listed.text
    rows = {row["agentId"]: row for row in listed.json()["agentTokens"]}
    assert rows["n1"]["revokedAt"] == revoked.json()["revokedAt"]
    assert rows["n2"]["revokedAt"] is None


def test_reenroll_lets_the_agent_id_enroll_again(client: TestClient, admin: dict[str, str]) -> None:
    old = _enroll(client, "n1")
    resp = client.delete("/api/v1/agents/n1/token?reenroll=true", headers=admin)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"agentId": "n1", "reenroll": True, "revokedAt": None}
    assert _credential(client, "n1") is None
    _refused(_sync(client, "n1", old), 401, "invalid agent token")
    new = _enroll(client, "n1")
    assert new != old
    # A forbidden id is allowed back the same way.
    client.delete("/api/v1/agents/n1/token", headers=admin)
    _refused(_sync(client, "n1", _enrollment(client)), 401, "revoked")
    assert client.delete("/api/v1/agents/n1/token?reenroll=1", headers=admin).status_code == 200
    assert _enroll(client, "n1") not in (old, new)


def test_the_token_list_shows_no_secret(client: TestClient, admin: dict[str, str]) -> None:
    token = _enroll(client, "n1")
    pending = _sync(client, "n2", _enrollment(client)).json()["agent_token"]
    listed = client.get("/api/v1/agents/tokens", headers=admin)
    assert listed.status_code == 200, listed.text
    rows = listed.json()["agentTokens"]
    assert [row["agentId"] for row in rows] == ["n1", "n2"]
    assert set(rows[0]) == {"agentId", "createdAt", "confirmedAt", "revokedAt"}
    assert rows[0]["confirmedAt"]
    assert rows[1]["confirmedAt"] is None
    for secret in (token, pending, hashlib.sha256(token.encode()).hexdigest()):
        assert secret not in listed.text


def test_only_admins_manage_agent_tokens(client: TestClient, admin: dict[str, str]) -> None:
    _enroll(client, "n1")
    make_user(client, admin, "bob")
    bob = login(client, "bob")
    for method, path in (
        ("GET", "/api/v1/agents/tokens"),
        ("DELETE", "/api/v1/agents/n1/token"),
        ("DELETE", "/api/v1/agents/n1/token?reenroll=true"),
    ):
        _refused(client.request(method, path, headers=bob), 403, "only an admin")
    assert _credential(client, "n1") is not None
    missing = client.delete("/api/v1/agents/nobody/token", headers=admin)
    _refused(missing, 404, "agent 'nobody' has no credential")


def test_a_held_sync_is_answered_401_as_soon_as_its_agent_is_revoked(tmp_path: Path) -> None:
    """The revocation wakes the agent's long-poll, and the woken sync does not answer the
    work it waited for: it checks its credential again."""
    with (
        live_server(make_settings(tmp_path / "home")) as live,
        httpx.Client(base_url=live.url, timeout=30.0) as http,
    ):
        state = live.state
        first = _sync(http, "n1", state.agent_token)
        token = str(first.json()["agent_token"])
        assert _sync(http, "n1", token).status_code == 200
        answers: list[httpx.Response] = []
        held = threading.Thread(
            target=lambda: answers.append(_sync(http, "n1", token, wait_seconds=15))
        )
        started = time.monotonic()
        held.start()
        deadline = time.monotonic() + 10
        while state.notifier.listeners(agent_key("n1")) == 0:
            assert time.monotonic() < deadline, "the sync was not held"
            time.sleep(0.01)
        admin = login(http, "admin")
        assert http.delete("/api/v1/agents/n1/token", headers=admin).status_code == 200
        held.join(10)
        assert not held.is_alive()
    _refused(answers[0], 401, "revoked while its sync waited")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("manager", "reserved"),
    [
        (
            {"type": "slurm", "job_storage_root": "JOBS", "master_url": "http://head:8080"},
            "slurm",
        ),
        (
            {"type": "pbs", "job_storage_root": "JOBS", "master_url": "http://head:8080"},
            "pbs",
        ),
    ],
)
def test_no_agent_may_sync_as_a_batch_launchers_containers(
    tmp_path: Path, manager: dict[str, str], reserved: str
) -> None:
    """On a master that runs batch jobs, the agent id its containers are recorded under is
    refused even with the enrollment token: an agent syncing as it would be sent their
    specs."""
    rm = {k: str(tmp_path / "jobs") if v == "JOBS" else v for k, v in manager.items()}
    settings = make_settings(tmp_path / "home", resource_manager=rm)
    with TestClient(create_app(settings, run_cluster=False)) as client:
        _refused(_sync(client, reserved, _enrollment(client)), 403, "is reserved")
        assert _credential(client, reserved) is None
        _refused(_sync(client, reserved, "wrong"), 401, "invalid agent token")  # token first
        assert _sync(client, "gpu-node-1", _enrollment(client)).status_code == 200


def test_an_overlong_agent_id_is_refused_before_it_enrolls(client: TestClient) -> None:
    _refused(_sync(client, "a" * 256, _enrollment(client)), 400, "at most 255 characters")
    assert _credential(client, "a" * 256) is None
