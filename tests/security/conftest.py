"""Fixtures for the security tests: an in-process master on SQLite (its real database and
rules; no mocks), users and workspaces made through the API or the master's own tables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.db.tables import Project, Workspace
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
    """An in-process master (lifespan run, no cluster loop), no credentials attached."""
    with TestClient(create_app(settings, run_cluster=False)) as test_client:
        yield test_client


def state_of(client: TestClient) -> MasterState:
    """The master state behind ``client``."""
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    return state


def login(client: TestClient, username: str, password: str = "") -> dict[str, str]:
    """Log in as the official client does; the Authorization header."""
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


def make_user(
    client: TestClient, admin: dict[str, str], username: str, *, is_admin: bool = False
) -> int:
    """Create a user (empty password) through the API; its id."""
    resp = client.post(
        "/api/v1/users",
        json={"user": {"username": username, "admin": is_admin, "active": True}},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    user_id: int = resp.json()["user"]["id"]
    return user_id


def make_workspace(client: TestClient, name: str, *, default_role: str | None = None) -> int:
    """A workspace with one project (rows in the master's database); the project's id."""
    with state_of(client).sessions() as session:
        workspace = Workspace(name=name, default_role=default_role)
        session.add(workspace)
        session.flush()
        project = Project(name=f"{name}-project", workspace_id=workspace.id)
        session.add(project)
        session.commit()
        return project.id


def workspace_of(client: TestClient, project_id: int) -> int:
    """The workspace of a project."""
    with state_of(client).sessions() as session:
        project = session.get(Project, project_id)
        assert project is not None
        return project.workspace_id
