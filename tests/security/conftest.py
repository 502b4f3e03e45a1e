"""Fixtures for the security tests: an in-process master on SQLite (its real database and
rules; no mocks), users and workspaces made through the API or the master's own tables."""

from __future__ import annotations

from fastapi.testclient import TestClient

from stalwart.master.db.tables import Project, Workspace
from stalwart.master.state import MasterState

# The master's in-process fixtures (settings, client, admin) and helpers, shared as they are.
from tests.master.conftest import admin, client, login, make_settings, settings

__all__ = ["admin", "client", "login", "make_settings", "settings", "state_of"]


def state_of(client: TestClient) -> MasterState:
    """The master state behind ``client``."""
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    return state


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
