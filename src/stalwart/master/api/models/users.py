"""Wire models of users and login (wire doc section 2)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "AgentUserGroup",
    "AgentUserGroupRequest",
    "GetUserSettingResponse",
    "GetUsersResponse",
    "LoginRequest",
    "LoginResponse",
    "MeResponse",
    "NewUserSpec",
    "OrderBy",
    "PatchUserRequest",
    "PatchUsersRequest",
    "PatchUsersResponse",
    "PostUserRequest",
    "PostUserSettingRequest",
    "SetUserPasswordRequest",
    "UserActionResult",
    "UserResponse",
    "UserSortBy",
    "UserWebSetting",
    "V1User",
]


class AgentUserGroup(WireModel):
    """``v1AgentUserGroup``: the identity a user's tasks run as on agents."""

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


class LoginRequest(WireRequest):
    username: str = Field(description="Login name.")
    password: str = Field(default="", description="Password, client-side hashed if isHashed.")
    is_hashed: bool = Field(default=False, description="Whether `password` is already hashed.")


class LoginResponse(WireModel):
    token: str = Field(description="Session token for `Authorization: Bearer`.")
    user: V1User = Field(description="The logged-in user.")


class MeResponse(WireModel):
    user: V1User = Field(description="The calling user.")


# --- users endpoints (GetUsers, GetUser, PostUser, PatchUser, PatchUsers, SetUserPassword) ---


class UserSortBy(StrEnum):
    """``v1GetUsersRequestSortBy``: the column ``GET /api/v1/users`` sorts on."""

    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    DISPLAY_NAME = "SORT_BY_DISPLAY_NAME"
    USER_NAME = "SORT_BY_USER_NAME"
    ADMIN = "SORT_BY_ADMIN"
    ACTIVE = "SORT_BY_ACTIVE"
    MODIFIED_TIME = "SORT_BY_MODIFIED_TIME"
    NAME = "SORT_BY_NAME"
    LAST_AUTH_TIME = "SORT_BY_LAST_AUTH_TIME"
    REMOTE = "SORT_BY_REMOTE"


class OrderBy(StrEnum):
    """``v1OrderBy``: ascending (also for UNSPECIFIED) or descending."""

    UNSPECIFIED = "ORDER_BY_UNSPECIFIED"
    ASC = "ORDER_BY_ASC"
    DESC = "ORDER_BY_DESC"


class UserResponse(WireModel):
    """``{user}``: the answer of GetUser, GetUserByUsername, PostUser, PatchUser and
    SetUserPassword (PatchUser and the two GetUser responses REQUIRE ``user``)."""

    user: V1User = Field(description="The user.")


class GetUsersResponse(WireModel):
    """``v1GetUsersResponse``."""

    users: list[V1User] = Field(default_factory=list, description="This page of users.")
    pagination: Pagination = Field(description="Where this page lies in the filtered list.")


class AgentUserGroupRequest(WireRequest):
    """``v1AgentUserGroup`` in a request: all four set links, all four unset unlinks."""

    agent_uid: int | None = Field(default=None, description="UID tasks run as.")
    agent_gid: int | None = Field(default=None, description="GID tasks run as.")
    agent_user: str | None = Field(default=None, description="User name tasks run as.")
    agent_group: str | None = Field(default=None, description="Group name tasks run as.")


class NewUserSpec(WireRequest):
    """The ``user`` of a PostUser request (a ``v1User``; ``id`` and times are ignored).

    ``null`` means unset: ``admin`` and ``remote`` default to false, ``active`` to true.
    """

    username: str = Field(description="Login name.")
    admin: bool | None = Field(default=None, description="Whether the user is an admin.")
    active: bool | None = Field(default=None, description="Whether the user may log in.")
    remote: bool | None = Field(
        default=None, description="Password login disabled (external identity provider)."
    )
    display_name: str | None = Field(default=None, description="Display name.")
    agent_user_group: AgentUserGroupRequest | None = Field(
        default=None, description="Identity the user's tasks run as on agents."
    )


class PostUserRequest(WireRequest):
    """``v1PostUserRequest``: ``POST /api/v1/users``."""

    user: NewUserSpec = Field(description="The user to create.")
    password: str | None = Field(
        default=None, description="Password (client-side hashed when isHashed); empty = none."
    )
    is_hashed: bool | None = Field(
        default=None, description="Whether `password` is already client-side hashed."
    )


class PatchUserRequest(WireRequest):
    """``v1PatchUser``: ``PATCH /api/v1/users/{userId}``; absent or ``null`` = unchanged."""

    username: str | None = Field(default=None, description="New login name.")
    display_name: str | None = Field(default=None, description="New display name; empty clears it.")
    admin: bool | None = Field(default=None, description="Grant or remove admin rights.")
    active: bool | None = Field(default=None, description="Activate or deactivate.")
    remote: bool | None = Field(default=None, description="Disable or allow password login.")
    password: str | None = Field(default=None, description="New password.")
    is_hashed: bool | None = Field(
        default=None, description="Whether `password` is already client-side hashed."
    )
    agent_user_group: AgentUserGroupRequest | None = Field(
        default=None, description="Link with (all four fields) or unlink from an agent identity."
    )


class SetUserPasswordRequest(WireRequest):
    """Object form of the SetUserPassword body (the 0.38 client sends a bare JSON string)."""

    password: str = Field(description="New password.")
    is_hashed: bool | None = Field(
        default=None, description="Whether `password` is already client-side hashed."
    )


class PatchUsersRequest(WireRequest):
    """``v1PatchUsersRequest``: ``PATCH /api/v1/users`` (the web UI's bulk (de)activation)."""

    user_ids: list[int] = Field(description="Ids of the users to change.")
    activate: bool = Field(description="Activate (true) or deactivate (false) them.")


class UserActionResult(WireModel):
    """``v1UserActionResult``: one user's outcome; ``error`` is empty on success."""

    id: int = Field(description="User id.")
    error: str = Field(description="Why it failed; empty on success.")


class PatchUsersResponse(WireModel):
    """``v1PatchUsersResponse``."""

    results: list[UserActionResult] = Field(
        default_factory=list, description="One result per requested id."
    )


class UserWebSetting(WireModel):
    """``v1UserWebSetting``: one setting of the user's web UI."""

    key: str
    value: str | None = None
    storage_path: str | None = None


class GetUserSettingResponse(WireModel):
    """``v1GetUserSettingResponse``."""

    settings: list[UserWebSetting] = Field(default_factory=list)


class PostUserSettingRequest(WireRequest):
    """``v1PostUserSettingRequest`` (an empty or absent value removes the setting)."""

    settings: list[UserWebSetting] = Field(default_factory=list)
