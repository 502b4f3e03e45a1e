"""``POST /api/v1/agents/{id}/sync`` over HTTP: the agent token, and long-polls that never
outlast the agent timeout (a held sync is no heartbeat)."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient

from stalwart.agent.protocol import AGENT_TOKEN_HEADER
from stalwart.master.app import create_app
from tests.master.conftest import make_settings

BODY = {"slots": [{"id": "0", "device_type": "cpu"}], "containers": [], "wait_seconds": 30}


def test_a_quiet_agent_is_answered_well_within_the_agent_timeout(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", cluster={"agent_timeout": 1.5})
    with TestClient(create_app(settings, run_cluster=False)) as client:
        token = client.app.state.master.agent_token  # type: ignore[attr-defined]
        client.post("/api/v1/agents/n1/sync", json=BODY, headers={AGENT_TOKEN_HEADER: token})
        started = time.monotonic()
        answer = client.post(
            "/api/v1/agents/n1/sync", json=BODY, headers={AGENT_TOKEN_HEADER: token}
        )
        held = time.monotonic() - started
    assert answer.status_code == 200
    assert answer.json()["start"] == []
    assert held < 1.5  # asked to wait 30 s; answered within a third of the timeout (+ slack)


def test_a_wrong_agent_token_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with TestClient(create_app(make_settings(tmp_path / "home"), run_cluster=False)) as client:
        answer = client.post(
            "/api/v1/agents/n1/sync", json=BODY, headers={AGENT_TOKEN_HEADER: "nope"}
        )
    assert answer.status_code == 401
    assert "agent_token" in answer.json()["message"]
