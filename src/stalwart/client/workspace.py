"""Workspaces and projects as the SDK sees them (:class:`Workspace`, :class:`Project`).

Get them from :class:`~stalwart.client.Client` (``create_workspace``, ``get_workspace``,
``list_workspaces``). Names are looked up exactly (workspaces: any case); a workspace or project
the user may not see raises NotFoundError, as an unknown one does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stalwart.client.record import NamedRecord
from stalwart.client.session import Session
from stalwart.errors import NotFoundError
from stalwart.master.api.models.projects import (
    GetProjectResponse,
    GetWorkspaceProjectsResponse,
    NotesResponse,
    ProjectResponse,
    V1Project,
)
from stalwart.master.api.models.workspaces import (
    GetWorkspaceResponse,
    GetWorkspacesResponse,
    PatchWorkspaceResponse,
    V1Workspace,
)

__all__ = ["Project", "Workspace", "find_workspace"]


def find_workspace(session: Session, name: str) -> V1Workspace:
    """The workspace called ``name`` (NotFoundError when the user sees none)."""
    found = session.get("/api/v1/workspaces", GetWorkspacesResponse, {"name": name}).workspaces
    if not found:
        raise NotFoundError(f"workspace '{name}' not found")
    return found[0]


class Project(NamedRecord[V1Project]):
    """One project (``id``, ``name``, ``key``; ``data`` holds all of ``v1Project``)."""

    @property
    def key(self) -> str:
        return self.data.key

    def reload(self) -> Project:
        """Read the project again; returns ``self``."""
        path = f"/api/v1/projects/{self.id}"
        self.data = self._session.get(path, GetProjectResponse).project
        return self

    def edit(
        self, *, name: str | None = None, description: str | None = None, key: str | None = None
    ) -> Project:
        """Rename, describe or re-key it; returns ``self``, reloaded."""
        body = {"name": name, "description": description, "key": key}
        path = f"/api/v1/projects/{self.id}"
        self.data = self._patch_answer(path, body, ProjectResponse).project
        return self

    def archive(self) -> None:
        """Archive it (it takes no new experiments)."""
        self._session.post(f"/api/v1/projects/{self.id}/archive")

    def unarchive(self) -> None:
        """Unarchive it."""
        self._session.post(f"/api/v1/projects/{self.id}/unarchive")

    def set_notes(self, notes: list[Mapping[str, str]]) -> list[dict[str, str]]:
        """Replace its notes (``{"name": ..., "contents": ...}`` each); the notes now."""
        body = {"notes": [dict(n) for n in notes], "projectId": self.id}
        answer = self._session.request("PUT", f"/api/v1/projects/{self.id}/notes", body=body)
        return [n.model_dump() for n in NotesResponse.model_validate(answer).notes]

    def add_note(self, name: str, contents: str) -> list[dict[str, str]]:
        """Append a note; the notes now."""
        body = {"name": name, "contents": contents}
        answer = self._session.post(f"/api/v1/projects/{self.id}/notes", body)
        return [n.model_dump() for n in NotesResponse.model_validate(answer).notes]

    def delete(self) -> None:
        """Delete it (refused while it holds experiments)."""
        self._session.request("DELETE", f"/api/v1/projects/{self.id}")


class Workspace(NamedRecord[V1Workspace]):
    """One workspace (``id``, ``name``; ``data`` holds all of ``v1Workspace``)."""

    def reload(self) -> Workspace:
        """Read the workspace again; returns ``self``."""
        path = f"/api/v1/workspaces/{self.id}"
        self.data = self._session.get(path, GetWorkspaceResponse).workspace
        return self

    def edit(self, **changes: Any) -> Workspace:
        """Change it: ``name``, ``agent_user_group`` (``{"agentUid": ...}``, all four),
        ``checkpoint_storage_config`` (``{}`` clears), ``default_compute_pool``,
        ``default_aux_pool`` (``""`` clears); returns ``self``, reloaded."""
        body = {_camel(k): v for k, v in changes.items()}
        path = f"/api/v1/workspaces/{self.id}"
        self.data = self._patch_answer(path, body, PatchWorkspaceResponse).workspace
        return self

    def archive(self) -> None:
        """Archive it (it takes no new projects or experiments)."""
        self._session.post(f"/api/v1/workspaces/{self.id}/archive")

    def unarchive(self) -> None:
        """Unarchive it."""
        self._session.post(f"/api/v1/workspaces/{self.id}/unarchive")

    def pin(self) -> None:
        """Pin it (for this user)."""
        self._session.post(f"/api/v1/workspaces/{self.id}/pin")

    def unpin(self) -> None:
        """Unpin it (for this user)."""
        self._session.post(f"/api/v1/workspaces/{self.id}/unpin")

    def delete(self) -> None:
        """Delete it (refused while it holds experiments or running tasks)."""
        self._session.request("DELETE", f"/api/v1/workspaces/{self.id}")

    def create_project(
        self, name: str, *, description: str | None = None, key: str | None = None
    ) -> Project:
        """A new project here (a key is made from the name when none is given)."""
        body = {"name": name, "workspaceId": self.id, "description": description, "key": key}
        answer = self._session.post(f"/api/v1/workspaces/{self.id}/projects", body)
        return Project(self._session, ProjectResponse.model_validate(answer).project)

    def list_projects(self) -> list[Project]:
        """Its projects, by id."""
        path = f"/api/v1/workspaces/{self.id}/projects"
        found = self._session.get(path, GetWorkspaceProjectsResponse).projects
        return [Project(self._session, p) for p in found]

    def get_project(self, name: str) -> Project:
        """Its project called ``name`` (NotFoundError when there is none)."""
        path = f"/api/v1/workspaces/{self.id}/projects"
        found = self._session.get(path, GetWorkspaceProjectsResponse, {"name": name}).projects
        if not found:
            raise NotFoundError(f"project '{name}' not found in workspace '{self.name}'")
        return Project(self._session, found[0])


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
