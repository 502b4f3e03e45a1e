"""Fixtures for master tests: an in-process master on SQLite, and PostgreSQL when reachable.

``CI=true`` makes a missing PostgreSQL a failure instead of a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from stalwart.master.app import create_app
from stalwart.master.services.passwords import client_hash
from stalwart.master.settings import MasterSettings

PG_URL = os.environ.get("STALWART_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


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


def login(client: TestClient, username: str, password: str = "") -> dict[str, str]:
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


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose schema is private to this test (dropped afterwards).

    Skips when PostgreSQL is unreachable, except under CI=true, where it fails.
    """
    base = PG_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        engine = create_engine(base)
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except Exception as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {PG_URL} is required under CI=true: {exc}")
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable: {exc}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.execute(text(f'create schema "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'drop schema "{schema}" cascade'))
        engine.dispose()
