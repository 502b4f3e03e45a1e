"""Wire models of users and login (wire doc section 2)."""

from __future__ import annotations

from pydantic import Field

from stalwart.master.api.models.common import WireModel, WireRequest, wire_time
from stalwart.master.db.tables import User

__all__ = ["LoginRequest", "LoginResponse", "MeResponse", "V1User", "user_to_wire"]


class AgentUserGroup(WireModel):
    agent_uid: int | None = Field(default=None, description="Task UID.")
    agent_gid: int | None = Field(default=None, description="Task GID.")
    agent_user: str | None = Field(default=None, description="Task user name.")
    agent_group: str | None = Field(default=None, description="Task group name.")


class V1User(WireModel):
    """``v1User``: REQUIRED username, admin, active."""

    id: int | None = Field(default=None, description="User id.")
    username: str = Field(description="Login name.")
    admin: bool = Field(description="Whether the user is an admin.")
    active: bool = Field(description="Whether the user may log in.")
    display_name: str | None = Field(default=None, description="Display name.")
    remote: bool = Field(default=False, description="Managed by an external identity provider.")
    agent_user_group: AgentUserGroup | None = Field(default=None, description="Task identity.")
    modified_at: str | None = Field(default=None, description="Last change (RFC 3339).")
    last_auth_at: str | None = Field(default=None, description="Last login (RFC 3339).")


def user_to_wire(user: User) -> V1User:
    """The wire form of a user row."""
    group = None
    if any(v is not None for v in (user.agent_uid, user.agent_gid, user.agent_user)):
        group = AgentUserGroup(
            agent_uid=user.agent_uid,
            agent_gid=user.agent_gid,
            agent_user=user.agent_user,
            agent_group=user.agent_group,
        )
    return V1User(
        id=user.id,
        username=user.username,
        admin=user.admin,
        active=user.active,
        display_name=user.display_name,
        remote=user.remote,
        agent_user_group=group,
        modified_at=wire_time(user.modified_at),
        last_auth_at=wire_time(user.last_auth_at),
    )


class LoginRequest(WireRequest):
    username: str = Field(description="Login name.")
    password: str = Field(default="", description="Password, client-side hashed if isHashed.")
    is_hashed: bool = Field(default=False, description="Whether `password` is already hashed.")


class LoginResponse(WireModel):
    token: str = Field(description="Session token for `Authorization: Bearer`.")
    user: V1User = Field(description="The logged-in user.")


class MeResponse(WireModel):
    user: V1User = Field(description="The calling user.")
