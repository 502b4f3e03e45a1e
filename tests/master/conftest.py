"""Fixtures for master tests: an in-process master on SQLite (``pg_url`` for PostgreSQL is in
``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from stalwart.agent.protocol import AGENT_TOKEN_HEADER
from stalwart.master.app import create_app, open_state
from stalwart.master.services.passwords import client_hash
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState


def make_settings(home: Path, **extra: Any) -> MasterSettings:
    """Settings for a test master whose state lives under ``home``."""
    return MasterSettings.model_validate({"home": home, **extra})


@pytest.fixture
def settings(tmp_path: Path) -> MasterSettings:
    return make_settings(tmp_path / "home")


@pytest.fixture
def client(settings: MasterSettings) -> Iterator[TestClient]:
    """An in-process master (lifespan run) on SQLite, no credentials attached."""
    with TestClient(create_app(settings, run_cluster=False)) as test_client:
        yield test_client


def login(client: httpx.Client, username: str, password: str = "") -> dict[str, str]:
    """Log in the way the official client does; return the Authorization header."""
    resp = client.post(
        "/api/v1/auth/login",
        json={"username": username, "password": client_hash(password), "isHashed": True},
    )
    assert resp.status_code == 200, resp.text
    client.cookies.clear()  # tests pass credentials explicitly
    return {"Authorization": f"Bearer {resp.json()['token']}"}


@pytest.fixture
def admin(client: TestClient) -> dict[str, str]:
    """Authorization header of the built-in admin (empty password)."""
    return login(client, "admin")


def enroll(http: httpx.Client, agent_id: str, enrollment: str) -> dict[str, str]:
    """Enroll ``agent_id`` with the cluster's enrollment token, as an agent's first sync does;
    the header carrying the agent's own token (what its later syncs present)."""
    answer = http.post(
        f"/api/v1/agents/{agent_id}/sync", json={}, headers={AGENT_TOKEN_HEADER: enrollment}
    )
    assert answer.status_code == 200, answer.text
    token = answer.json()["agent_token"]
    assert token, answer.text
    return {AGENT_TOKEN_HEADER: str(token)}


@pytest.fixture(params=["sqlite", "postgresql"])
def db_state(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MasterState]:
    """A master's state (no HTTP, no cluster loop) on SQLite and on PostgreSQL in turn."""
    db = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    master = open_state(MasterSettings(home=tmp_path / "home", db=db))
    try:
        yield master
    finally:
        master.engine.dispose()
