"""User groups and resource pool bindings in the SDK: ``client.groups`` and
``client.pool_bindings`` (see :class:`~stalwart.client.client.Client`).

Both name users, groups and workspaces by name, as the CLI does, and resolve them to ids with
one request each. Errors are the master's (``NotFoundError`` for an unknown name,
``ForbiddenError`` when the caller is not a cluster admin or workspace admin...).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from stalwart.client.session import Session
from stalwart.errors import NotFoundError
from stalwart.master.api.models.groups import (
    GetGroupsResponse,
    GroupResponse,
    GroupSearchResult,
    PoolBindingsResponse,
    V1GroupDetails,
    WorkspaceRolesResponse,
)
from stalwart.master.api.models.users import UserResponse
from stalwart.master.api.models.workspaces import GetWorkspacesResponse

__all__ = ["PoolBindings", "UserGroups"]


def _user_ids(session: Session, usernames: Sequence[str]) -> list[int]:
    ids = []
    for name in usernames:
        user = session.get(f"/api/v1/users/{quote(name, safe='')}/by-username", UserResponse).user
        if user.id is None:  # pragma: no cover - the master always sends ids
            raise NotFoundError(f"user {name} has no id")
        ids.append(user.id)
    return ids


def _workspace_ids(session: Session, names: Sequence[str]) -> list[int]:
    ids = []
    for name in names:
        found = session.get(
            "/api/v1/workspaces", GetWorkspacesResponse, params={"nameCaseSensitive": name}
        ).workspaces
        if not found:
            raise NotFoundError(f"workspace '{name}' not found")
        ids.append(found[0].id)
    return ids


class UserGroups:
    """User groups: listing and reading (anyone), changing (cluster admins), and the roles
    given to them in workspaces (workspace admins)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def list(self, member: str | None = None) -> list[GroupSearchResult]:
        """Every group (with its member count), or those user ``member`` is in."""
        body: dict[str, object] = {"limit": 0}
        if member is not None:
            body["userId"] = _user_ids(self._session, [member])[0]
        data = self._session.post("/api/v1/groups/search", body)
        return GetGroupsResponse.model_validate(data).groups

    def _id(self, name: str) -> int:
        data = self._session.post("/api/v1/groups/search", {"limit": 1, "name": name})
        found = GetGroupsResponse.model_validate(data).groups
        if not found:
            raise NotFoundError(f"user group '{name}' not found")
        return found[0].group.group_id

    def get(self, name: str) -> V1GroupDetails:
        """The group called ``name`` and its members."""
        return self._session.get(f"/api/v1/groups/{self._id(name)}", GroupResponse).group

    def create(self, name: str, members: Sequence[str] = ()) -> V1GroupDetails:
        """A new group with ``members`` (usernames) in it."""
        body = {"name": name, "addUsers": _user_ids(self._session, members)}
        return GroupResponse.model_validate(self._session.post("/api/v1/groups", body)).group

    def _update(self, group: str, **change: object) -> V1GroupDetails:
        group_id = self._id(group)
        data = self._session.request("PUT", f"/api/v1/groups/{group_id}", body=change)
        return GroupResponse.model_validate(data).group

    def add_members(self, name: str, usernames: Sequence[str]) -> V1GroupDetails:
        """Add users to the group (refused for users already in it)."""
        return self._update(name, addUsers=_user_ids(self._session, usernames))

    def remove_members(self, name: str, usernames: Sequence[str]) -> V1GroupDetails:
        """Take users out of the group (refused for users not in it)."""
        return self._update(name, removeUsers=_user_ids(self._session, usernames))

    def rename(self, name: str, new_name: str) -> V1GroupDetails:
        """Give the group another name."""
        return self._update(name, name=new_name)

    def delete(self, name: str) -> None:
        """Delete the group: its members lose the roles given to it."""
        self._session.request("DELETE", f"/api/v1/groups/{self._id(name)}")

    def set_role(self, name: str, workspace: str, role: str) -> WorkspaceRolesResponse:
        """Give the group ``role`` (viewer, member, editor, admin) in ``workspace``."""
        path = self._role_path(name, workspace)
        data = self._session.request("PUT", path, body={"role": role})
        return WorkspaceRolesResponse.model_validate(data)

    def remove_role(self, name: str, workspace: str) -> WorkspaceRolesResponse:
        """Take away the role given to the group in ``workspace``."""
        data = self._session.request("DELETE", self._role_path(name, workspace))
        return WorkspaceRolesResponse.model_validate(data)

    def _role_path(self, name: str, workspace: str) -> str:
        workspace_id = _workspace_ids(self._session, [workspace])[0]
        return f"/api/v1/workspaces/{workspace_id}/roles/groups/{self._id(name)}"


class PoolBindings:
    """Resource pools bound to workspaces: a bound pool serves only the experiments and tasks
    of its workspaces. Reading: anyone; changing: cluster admins."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @staticmethod
    def _path(pool: str) -> str:
        return f"/api/v1/resource-pools/{quote(pool, safe='')}/workspace-bindings"

    def list(self, pool: str) -> list[str]:
        """The names of the workspaces ``pool`` is bound to (empty: it serves everyone)."""
        ids = self._session.get(self._path(pool), PoolBindingsResponse).workspace_ids
        everything = self._session.get("/api/v1/workspaces", GetWorkspacesResponse).workspaces
        names = {w.id: w.name for w in everything}
        return [names[i] for i in ids if i in names]

    def _change(self, method: str, pool: str, workspaces: Sequence[str]) -> None:
        body = {"resourcePoolName": pool, "workspaceNames": list(workspaces)}
        self._session.request(method, self._path(pool), body=body)

    def add(self, pool: str, workspaces: Sequence[str]) -> None:
        """Bind ``pool`` to ``workspaces`` too."""
        self._change("POST", pool, workspaces)

    def remove(self, pool: str, workspaces: Sequence[str]) -> None:
        """Unbind ``pool`` from ``workspaces``."""
        self._change("DELETE", pool, workspaces)

    def replace(self, pool: str, workspaces: Sequence[str]) -> None:
        """Bind ``pool`` to exactly ``workspaces``."""
        self._change("PUT", pool, workspaces)
