"""User groups: named sets of users that workspace roles can be given to.

Rules: anyone logged in may list and describe groups (their names and members); only cluster
admins create, rename and delete groups and change their members (the routes check that with
``require_admin``). Names are unique (compared exactly, as Determined does), not empty, at most
255 characters. Adding a user who is already a member, or removing one who is not, is refused
with a message naming them; unknown users are 404. Deleting a group removes its memberships and
the roles it was given (members keep their own assignments). Every change commits; nothing is
written when a rule refuses a request.

What a group's role means is :func:`stalwart.master.policy.workspace_role`'s business; giving
roles to groups is :mod:`stalwart.master.services.workspace_roles`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from stalwart.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import User, UserGroup, UserGroupMember

__all__ = [
    "GroupDetails",
    "GroupSummary",
    "create_group",
    "delete_group",
    "get_group",
    "search_groups",
    "update_group",
]

MAX_NAME_LENGTH = 255


@dataclass(frozen=True)
class GroupSummary:
    """A group and how many members it has."""

    group: UserGroup
    num_members: int


@dataclass(frozen=True)
class GroupDetails:
    """A group and its members, by user id."""

    group: UserGroup
    members: list[User]


def _clean_name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned:
        raise InvalidArgumentError("a group needs a name")
    if len(cleaned) > MAX_NAME_LENGTH:
        raise InvalidArgumentError(f"a group name has at most {MAX_NAME_LENGTH} characters")
    return cleaned


def _group(session: Session, group_id: int) -> UserGroup:
    group = session.get(UserGroup, group_id)
    if group is None:
        raise NotFoundError(f"user group {group_id} not found")
    return group


def _check_free(session: Session, name: str, *, other_than: int | None = None) -> None:
    taken = session.scalar(select(UserGroup.id).where(UserGroup.name == name))
    if taken is not None and taken != other_than:
        raise AlreadyExistsError(f"a user group named {name!r} already exists")


def _users(session: Session, user_ids: Sequence[int]) -> list[User]:
    wanted = list(dict.fromkeys(user_ids))
    found = {u.id: u for u in session.scalars(select(User).where(User.id.in_(wanted)))}
    missing = [str(uid) for uid in wanted if uid not in found]
    if missing:
        raise NotFoundError(f"user {', '.join(missing)} not found")
    return [found[uid] for uid in wanted]


def _member_ids(session: Session, group_id: int) -> set[int]:
    rows = session.scalars(
        select(UserGroupMember.user_id).where(UserGroupMember.group_id == group_id)
    )
    return set(rows)


def create_group(session: Session, name: str, user_ids: Sequence[int] = ()) -> GroupDetails:
    """A new group named ``name`` with users ``user_ids`` as its members."""
    cleaned = _clean_name(name)
    _check_free(session, cleaned)
    users = _users(session, user_ids)
    group = UserGroup(name=cleaned)
    session.add(group)
    session.flush()
    session.add_all(UserGroupMember(group_id=group.id, user_id=u.id) for u in users)
    session.commit()
    return get_group(session, group.id)


def search_groups(
    session: Session, *, name: str | None = None, user_id: int | None = None
) -> list[GroupSummary]:
    """Groups by id: all, the one named ``name``, or those with member ``user_id``."""
    counts = (
        select(UserGroupMember.group_id, func.count().label("n"))
        .group_by(UserGroupMember.group_id)
        .subquery()
    )
    query = (
        select(UserGroup, func.coalesce(counts.c.n, 0))
        .outerjoin(counts, counts.c.group_id == UserGroup.id)
        .order_by(UserGroup.id)
    )
    if name is not None:
        query = query.where(UserGroup.name == name)
    if user_id is not None:
        mine = select(UserGroupMember.group_id).where(UserGroupMember.user_id == user_id)
        query = query.where(UserGroup.id.in_(mine))
    return [GroupSummary(group, int(n)) for group, n in session.execute(query).all()]


def get_group(session: Session, group_id: int) -> GroupDetails:
    """A group and its members (404 if missing)."""
    group = _group(session, group_id)
    members = session.scalars(
        select(User)
        .join(UserGroupMember, UserGroupMember.user_id == User.id)
        .where(UserGroupMember.group_id == group_id)
        .order_by(User.id)
    )
    return GroupDetails(group, list(members))


def update_group(
    session: Session,
    group_id: int,
    *,
    name: str | None = None,
    add_user_ids: Sequence[int] = (),
    remove_user_ids: Sequence[int] = (),
) -> GroupDetails:
    """Rename the group and/or add and remove members, all or nothing."""
    group = _group(session, group_id)
    members = _member_ids(session, group_id)
    adding = _users(session, add_user_ids)
    removing = _users(session, remove_user_ids)
    if already := [u.username for u in adding if u.id in members]:
        raise AlreadyExistsError(f"{', '.join(already)} already in user group {group.name!r}")
    if absent := [u.username for u in removing if u.id not in members]:
        raise NotFoundError(f"{', '.join(absent)} not in user group {group.name!r}")
    if name is not None and name != group.name:
        cleaned = _clean_name(name)
        _check_free(session, cleaned, other_than=group.id)
        group.name = cleaned
    session.add_all(UserGroupMember(group_id=group.id, user_id=u.id) for u in adding)
    if removing:
        session.execute(
            delete(UserGroupMember).where(
                UserGroupMember.group_id == group.id,
                UserGroupMember.user_id.in_([u.id for u in removing]),
            )
        )
    session.commit()
    return get_group(session, group.id)


def delete_group(session: Session, group_id: int) -> None:
    """Delete the group, its memberships and the roles it was given (404 if missing)."""
    group = _group(session, group_id)
    session.delete(group)
    session.commit()
