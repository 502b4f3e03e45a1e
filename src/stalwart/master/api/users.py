"""Routes: users (``det user list/create/activate/deactivate/rename/edit/change-password/
link-with-agent-user`` and the SDK's ``Determined.list_users/get_user_by_*/create_user``).

``GET /api/v1/me`` lives with login in :mod:`stalwart.master.api.auth`. The rules (who may change
what, the last active admin, sessions ended on deactivation) live in
:mod:`stalwart.master.services.users`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query

from stalwart.errors import InvalidArgumentError
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep, get_caller
from stalwart.master.api.models.common import paginate
from stalwart.master.api.models.users import (
    AgentUserGroupRequest,
    GetUsersResponse,
    OrderBy,
    PatchUserRequest,
    PatchUsersRequest,
    PatchUsersResponse,
    PostUserRequest,
    SetUserPasswordRequest,
    UserActionResult,
    UserResponse,
    UserSortBy,
)
from stalwart.master.api.wire.users import user_to_wire
from stalwart.master.services import users
from stalwart.master.services.users import AgentLink, NewUser, SortKey, UserFilter, UserPatch

__all__ = ["router"]

router = APIRouter(tags=["users"])

_SORT_KEYS: dict[UserSortBy, SortKey] = {
    UserSortBy.UNSPECIFIED: "id",
    UserSortBy.DISPLAY_NAME: "display_name",
    UserSortBy.USER_NAME: "username",
    UserSortBy.ADMIN: "admin",
    UserSortBy.ACTIVE: "active",
    UserSortBy.MODIFIED_TIME: "modified_at",
    UserSortBy.NAME: "name",
    UserSortBy.LAST_AUTH_TIME: "last_auth_at",
    UserSortBy.REMOTE: "remote",
}


def _agent_link(group: AgentUserGroupRequest | None) -> AgentLink | None:
    if group is None:
        return None
    return AgentLink(
        uid=group.agent_uid, gid=group.agent_gid, user=group.agent_user, group=group.agent_group
    )


@router.get("/users", response_model=GetUsersResponse, dependencies=[Depends(get_caller)])
def get_users(
    session: SessionDep,
    sort_by: Annotated[UserSortBy, Query(alias="sortBy")] = UserSortBy.UNSPECIFIED,
    order_by: Annotated[OrderBy, Query(alias="orderBy")] = OrderBy.UNSPECIFIED,
    offset: Annotated[int, Query(description="Skip this many; negative counts from the end.")] = 0,
    limit: Annotated[int, Query(description="At most this many; 0 = all.")] = 0,
    name: Annotated[str | None, Query(description="Substring of username/display name.")] = None,
    active: Annotated[bool | None, Query(description="Only (in)active users.")] = None,
    admin: Annotated[bool | None, Query(description="Only (non-)admins.")] = None,
    role_ids: Annotated[
        list[int] | None,
        Query(alias="roleIdAssignedDirectlyToUser", description="RBAC only; refused here."),
    ] = None,
) -> GetUsersResponse:
    """List users (GetUsers), filtered, sorted (ties by id) and paginated."""
    if role_ids:
        raise InvalidArgumentError("cannot filter by role id: this master has no RBAC")
    where = UserFilter(name=name, active=active, admin=admin)
    start, end, pagination = paginate(users.count_users(session, where), offset, limit)
    found = users.list_users(
        session,
        where,
        sort=_SORT_KEYS[sort_by],
        descending=order_by is OrderBy.DESC,
        offset=start,
        limit=end - start,
    )
    return GetUsersResponse(users=[user_to_wire(u) for u in found], pagination=pagination)


@router.get("/users/{user_id:int}", response_model=UserResponse, dependencies=[Depends(get_caller)])
def get_user(user_id: int, session: SessionDep) -> UserResponse:
    """One user by id (GetUser)."""
    return UserResponse(user=user_to_wire(users.get_user(session, user_id)))


@router.get(
    "/users/{username}/by-username",
    response_model=UserResponse,
    dependencies=[Depends(get_caller)],
)
def get_user_by_username(username: str, session: SessionDep) -> UserResponse:
    """One user by exact username (GetUserByUsername)."""
    return UserResponse(user=user_to_wire(users.get_user_by_username(session, username)))


@router.post("/users", response_model=UserResponse)
def post_user(
    body: PostUserRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> UserResponse:
    """Create a user (PostUser; admins only). A duplicate username is 409."""
    spec = body.user
    new = NewUser(
        username=spec.username,
        admin=bool(spec.admin),
        active=spec.active is not False,
        remote=bool(spec.remote),
        display_name=spec.display_name,
        password=body.password or "",
        is_hashed=bool(body.is_hashed),
        agent=_agent_link(spec.agent_user_group),
    )
    min_length = state.settings.security.min_password_length
    user = users.create_user(session, caller.user, new, min_password_length=min_length)
    return UserResponse(user=user_to_wire(user))


@router.patch("/users/{user_id:int}", response_model=UserResponse)
def patch_user(
    user_id: int, body: PatchUserRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> UserResponse:
    """Change a user's fields (PatchUser); absent or null fields stay as they are."""
    patch = UserPatch(
        username=body.username,
        display_name=body.display_name,
        admin=body.admin,
        active=body.active,
        remote=body.remote,
        password=body.password,
        is_hashed=bool(body.is_hashed),
        agent=_agent_link(body.agent_user_group),
    )
    user = users.patch_user(
        session,
        caller.user,
        user_id,
        patch,
        caller_session_id=caller.session_id,
        min_password_length=state.settings.security.min_password_length,
    )
    return UserResponse(user=user_to_wire(user))


@router.patch("/users", response_model=PatchUsersResponse)
def patch_users(
    body: PatchUsersRequest, caller: CallerDep, session: SessionDep
) -> PatchUsersResponse:
    """(De)activate several users (PatchUsers); one result per id, each done on its own."""
    results = users.set_active_many(session, caller.user, body.user_ids, body.activate)
    return PatchUsersResponse(results=[UserActionResult(id=i, error=e) for i, e in results])


@router.post("/users/{user_id:int}/password", response_model=UserResponse)
def set_user_password(
    user_id: int,
    body: Annotated[str | SetUserPasswordRequest, Body()],
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> UserResponse:
    """Set a user's password (SetUserPassword; admin or the user themself).

    The 0.38 client sends the plain password as a bare JSON string; ``{"password", "isHashed"}``
    is accepted too.
    """
    if isinstance(body, str):
        password, is_hashed = body, False
    else:
        password, is_hashed = body.password, bool(body.is_hashed)
    user = users.set_password(
        session,
        caller.user,
        user_id,
        password,
        is_hashed=is_hashed,
        caller_session_id=caller.session_id,
        min_password_length=state.settings.security.min_password_length,
    )
    return UserResponse(user=user_to_wire(user))
