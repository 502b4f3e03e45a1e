"""Routes: user groups (``det user-group create/list/describe/add-user/remove-user/change-name/
delete``).

``POST /api/v1/groups/search`` and ``GET /api/v1/groups/{id}`` answer anyone logged in;
``POST /api/v1/groups``, ``PUT`` and ``DELETE /api/v1/groups/{id}`` cluster admins only. The
rules are :mod:`stalwart.master.services.user_groups`'s.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from stalwart.errors import ForbiddenError, InvalidArgumentError
from stalwart.master.api.deps import Caller, CallerDep, SessionDep
from stalwart.master.api.models.common import Empty, paginate
from stalwart.master.api.models.groups import (
    CreateGroupRequest,
    GetGroupsRequest,
    GetGroupsResponse,
    GroupResponse,
    GroupSearchResult,
    UpdateGroupRequest,
    V1Group,
    V1GroupDetails,
)
from stalwart.master.api.wire.users import user_to_wire
from stalwart.master.services import user_groups as svc

__all__ = ["router"]

router = APIRouter(tags=["user groups"])


def _group_admin(caller: CallerDep) -> Caller:
    if not caller.user.admin:
        raise ForbiddenError(
            f"user {caller.user.username} cannot change user groups: only a cluster admin can"
        )
    return caller


AdminDep = Annotated[Caller, Depends(_group_admin)]


def _details(found: svc.GroupDetails) -> GroupResponse:
    return GroupResponse(
        group=V1GroupDetails(
            group_id=found.group.id,
            name=found.group.name,
            users=[user_to_wire(u) for u in found.members],
        )
    )


@router.post("/groups", response_model=GroupResponse)
def create_group(body: CreateGroupRequest, _admin: AdminDep, session: SessionDep) -> GroupResponse:
    """Create a user group, with its first members (cluster admins)."""
    return _details(svc.create_group(session, body.name, body.add_users))


@router.post("/groups/search", response_model=GetGroupsResponse)
def search_groups(
    body: GetGroupsRequest, _caller: CallerDep, session: SessionDep
) -> GetGroupsResponse:
    """User groups by id: all, the one with a name, or those a user is in; paginated."""
    found = svc.search_groups(session, name=body.name, user_id=body.user_id)
    start, end, page = paginate(len(found), body.offset, body.limit)
    return GetGroupsResponse(
        groups=[
            GroupSearchResult(
                group=V1Group(group_id=g.group.id, name=g.group.name), num_members=g.num_members
            )
            for g in found[start:end]
        ],
        pagination=page,
    )


@router.get("/groups/{group_id}", response_model=GroupResponse)
def get_group(group_id: int, _caller: CallerDep, session: SessionDep) -> GroupResponse:
    """A user group and its members."""
    return _details(svc.get_group(session, group_id))


@router.put("/groups/{group_id}", response_model=GroupResponse)
def update_group(
    group_id: int, body: UpdateGroupRequest, _admin: AdminDep, session: SessionDep
) -> GroupResponse:
    """Rename a user group and/or add and remove members (cluster admins)."""
    if body.group_id is not None and body.group_id != group_id:
        raise InvalidArgumentError(
            f"the body names group {body.group_id} but the path names group {group_id}"
        )
    return _details(
        svc.update_group(
            session,
            group_id,
            name=body.name,
            add_user_ids=body.add_users,
            remove_user_ids=body.remove_users,
        )
    )


@router.delete("/groups/{group_id}", response_model=Empty)
def delete_group(group_id: int, _admin: AdminDep, session: SessionDep) -> Empty:
    """Delete a user group: its members lose the roles given to it (cluster admins)."""
    svc.delete_group(session, group_id)
    return Empty()
