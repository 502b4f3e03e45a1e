"""Users: listing, creating and editing accounts, and the rules that guard them.

Who may do what (Determined's basic authorization, plus two guards of our own):

- anyone logged in may read users;
- only an admin creates users or changes a user's username, admin rights, active flag, remote
  flag or agent identity;
- a user may change their own display name and password; an admin may change anyone's;
- nobody deactivates themselves, and the last active admin can neither be deactivated nor lose
  admin rights (the cluster would be left with no way to administer it).

Sessions: deactivating a user ends all of their sessions (their tokens answer 401 and logging in
answers 403 "user is not active"); a password change ends all of their sessions except the
caller's own current one.

Passwords arrive client-side hashed (``is_hashed``) or plain and are stored through
:mod:`stalwart.master.services.passwords`. A password that is set must have at least
``min_password_length`` characters (``security.min_password_length``; 400 otherwise). The
length of a client-hashed password cannot be seen, so only the empty one (``""``, which the
client's hash keeps) is refused there; the official client checks the rest itself. A user
created without any password has none (as on Determined's master), like the built-in users
with the empty initial password, until one is set. A remote user (password login disabled) stores
:data:`NO_PASSWORD_LOGIN`, which no password matches. Every change commits before returning;
nothing is written when a rule refuses a request.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import ColumnElement, delete, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from stalwart.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
    StalwartError,
)
from stalwart.master.db.tables import User, UserSession, utcnow
from stalwart.master.services.passwords import client_hash, hash_password

__all__ = [
    "MIN_PASSWORD_LENGTH",
    "NO_PASSWORD_LOGIN",
    "AgentLink",
    "NewUser",
    "SortKey",
    "UserFilter",
    "UserPatch",
    "agent_link_values",
    "clean_username",
    "count_users",
    "create_user",
    "get_user",
    "get_user_by_username",
    "list_users",
    "patch_user",
    "set_active_many",
    "set_password",
]

NO_PASSWORD_LOGIN = "!no-password-login"
"""Stored password hash of a remote user: not a valid hash, so no password ever matches it."""

MIN_PASSWORD_LENGTH = 8
"""The default of ``security.min_password_length``."""

MAX_NAME_LENGTH = 255  # the width of users.username and users.display_name

SortKey = Literal[
    "id",
    "username",
    "display_name",
    "name",
    "admin",
    "active",
    "remote",
    "modified_at",
    "last_auth_at",
]
"""What a user list can be sorted on (``name`` is the display name, else the username)."""

_SORT_COLUMNS: dict[SortKey, Any] = {
    "id": User.id,
    "username": User.username,
    "display_name": User.display_name,
    "name": func.coalesce(func.nullif(User.display_name, ""), User.username),
    "admin": User.admin,
    "active": User.active,
    "remote": User.remote,
    "modified_at": User.modified_at,
    "last_auth_at": User.last_auth_at,
}


@dataclass(frozen=True)
class UserFilter:
    """Which users a list holds; ``None`` members do not filter."""

    name: str | None = None
    """Substring of the username or display name, without case."""
    active: bool | None = None
    admin: bool | None = None

    def clauses(self) -> list[ColumnElement[bool]]:
        """The WHERE clauses of this filter."""
        out: list[ColumnElement[bool]] = []
        if self.name:
            out.append(
                or_(
                    User.username.icontains(self.name, autoescape=True),
                    User.display_name.icontains(self.name, autoescape=True),
                )
            )
        if self.active is not None:
            out.append(User.active.is_(self.active))
        if self.admin is not None:
            out.append(User.admin.is_(self.admin))
        return out


@dataclass(frozen=True)
class AgentLink:
    """The identity a user's tasks run as on agents: all four set, or none (to unlink)."""

    uid: int | None = None
    gid: int | None = None
    user: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class NewUser:
    """A user to create; ``password`` is plain unless ``is_hashed`` ("" = no password)."""

    username: str
    admin: bool = False
    active: bool = True
    remote: bool = False
    display_name: str | None = None
    password: str = ""
    is_hashed: bool = False
    agent: AgentLink | None = None


@dataclass(frozen=True)
class UserPatch:
    """Changes to a user; ``None`` members stay as they are.

    ``display_name=""`` clears the display name; ``agent=AgentLink()`` unlinks the agent
    identity; ``password`` is plain unless ``is_hashed``.
    """

    username: str | None = None
    display_name: str | None = None
    admin: bool | None = None
    active: bool | None = None
    remote: bool | None = None
    password: str | None = None
    is_hashed: bool = False
    agent: AgentLink | None = None


# --- reading ---


def get_user(session: Session, user_id: int) -> User:
    """The user with id ``user_id``; NotFoundError otherwise."""
    user = session.get(User, user_id)
    if user is None:
        raise NotFoundError(f"user {user_id} not found")
    return user


def get_user_by_username(session: Session, username: str) -> User:
    """The user named exactly ``username``; NotFoundError otherwise."""
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        raise NotFoundError(f"user '{username}' not found")
    return user


def count_users(session: Session, where: UserFilter) -> int:
    """How many users match ``where``."""
    total = session.scalar(select(func.count()).select_from(User).where(*where.clauses()))
    return int(total or 0)


def list_users(
    session: Session,
    where: UserFilter,
    *,
    sort: SortKey = "id",
    descending: bool = False,
    offset: int = 0,
    limit: int | None = None,
) -> list[User]:
    """Users matching ``where``, sorted (ties by id), from ``offset``, at most ``limit``.

    Missing values sort last when ascending and first when descending, on every database.
    """
    column = _SORT_COLUMNS[sort]
    order = column.desc().nulls_first() if descending else column.asc().nulls_last()
    query = select(User).where(*where.clauses()).order_by(order)
    if sort != "id":
        query = query.order_by(User.id.asc())
    query = query.offset(max(0, offset))
    if limit is not None:
        query = query.limit(max(0, limit))
    return list(session.scalars(query))


# --- validation ---


def clean_username(raw: str, *, admin: bool, current: str | None = None) -> str:
    """``raw`` stripped, if it is a valid username for a user (``admin``, now named ``current``).

    Printable ASCII without spaces or ``/`` (the name travels in URL paths and shell commands),
    at most 255 characters. Only an admin may be named ``admin``, and ``determined`` belongs to
    the built-in user.
    """
    name = raw.strip()
    if not name:
        raise InvalidArgumentError("username must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgumentError(f"username is longer than {MAX_NAME_LENGTH} characters")
    bad = sorted({c for c in name if not "!" <= c <= "~" or c == "/"})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise InvalidArgumentError(
            f"username {name!r} has characters that are not allowed ({shown}): "
            "use printable ASCII without spaces or '/'"
        )
    lowered = name.lower()
    if lowered == "admin" and not admin:
        raise InvalidArgumentError("only an admin user can be named 'admin'")
    if lowered == "determined" and (current or "").lower() != "determined":
        raise InvalidArgumentError("the name 'determined' belongs to the built-in user")
    return name


def _free_username(
    session: Session, raw: str, *, admin: bool, user_id: int | None, current: str | None
) -> str:
    """:func:`clean_username`, checking first that no other user has the name (409)."""
    name = raw.strip()
    query = select(User.username).where(func.lower(User.username) == name.lower())
    if user_id is not None:
        query = query.where(User.id != user_id)
    taken = session.scalar(query) if name else None
    if taken is not None:
        note = "" if taken == name else f" as '{taken}' (usernames are compared without case)"
        raise AlreadyExistsError(f"user '{name}' already exists{note}")
    return clean_username(name, admin=admin, current=current)


def _clean_display_name(session: Session, raw: str, user_id: int | None) -> str:
    """``raw`` stripped, if no other user has that name (without case); "" is a cleared name
    (stored as given: Determined's client reads ``displayName: ""`` back after clearing it)."""
    name = raw.strip()
    if not name:
        return ""
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgumentError(f"display name is longer than {MAX_NAME_LENGTH} characters")
    if any(unicodedata.category(c).startswith("C") for c in name):
        raise InvalidArgumentError("display name must not contain control characters")
    lowered = name.lower()
    query = select(User.username).where(
        or_(func.lower(User.username) == lowered, func.lower(User.display_name) == lowered)
    )
    if user_id is not None:
        query = query.where(User.id != user_id)
    other = session.scalar(query)
    if other is not None:
        raise InvalidArgumentError(
            f"display name {name!r} is too close to the name of user '{other}'"
        )
    return name


def agent_link_values(
    link: AgentLink,
) -> tuple[int | None, int | None, str | None, str | None]:
    """The four agent columns (uid, gid, user, group) for ``link`` (all None to unlink), or
    InvalidArgumentError; users and workspaces follow the same rule."""
    return _agent_values(link)


def _agent_values(link: AgentLink) -> tuple[int | None, int | None, str | None, str | None]:
    """The four agent columns for ``link`` (all None to unlink), or InvalidArgumentError."""
    values = (link.uid, link.gid, link.user, link.group)
    if all(v is None for v in values):
        return (None, None, None, None)
    if link.uid is None or link.gid is None or link.user is None or link.group is None:
        raise InvalidArgumentError(
            "agentUid, agentGid, agentUser and agentGroup go together: "
            "give all four to link a user, or none to unlink"
        )
    if link.uid < 0 or link.gid < 0:
        raise InvalidArgumentError("agentUid and agentGid must not be negative")
    user, group = link.user.strip(), link.group.strip()
    if not user or not group:
        raise InvalidArgumentError("agentUser and agentGroup must not be empty")
    return (link.uid, link.gid, user, group)


def _stored_password(password: str, *, is_hashed: bool, min_length: int) -> str | None:
    """The stored hash of a password being set; InvalidArgumentError when it is too short."""
    too_short = password == "" if is_hashed else len(password) < min_length
    if too_short and min_length > 0:
        raise InvalidArgumentError(
            f"a password must have at least {min_length} characters "
            "(the master's security.min_password_length)"
        )
    return hash_password(password if is_hashed else client_hash(password))


def _keep_an_admin(session: Session, target: User, action: str) -> None:
    """Refuse ``action`` when ``target`` is the last active admin."""
    if not (target.admin and target.active):
        return
    others = session.scalar(
        select(func.count())
        .select_from(User)
        .where(User.admin.is_(True), User.active.is_(True), User.id != target.id)
    )
    if not others:
        raise FailedPreconditionError(
            f"cannot {action} '{target.username}': it is the last active admin "
            "(make another active user an admin first)"
        )


def _end_sessions(session: Session, user_id: int, *, keep: int | None) -> None:
    query = delete(UserSession).where(UserSession.user_id == user_id)
    if keep is not None:
        query = query.where(UserSession.id != keep)
    session.execute(query)


def _commit(session: Session, username: str) -> None:
    """Commit; a unique-constraint race on the username becomes AlreadyExistsError."""
    try:
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise AlreadyExistsError(f"user '{username}' already exists") from exc


# --- changing ---


def create_user(
    session: Session,
    caller: User,
    new: NewUser,
    *,
    min_password_length: int = MIN_PASSWORD_LENGTH,
) -> User:
    """Create ``new`` (admins only) and commit; returns the stored user.

    ``new.password`` empty creates a user without a password; any other must have at least
    ``min_password_length`` characters.
    """
    if not caller.admin:
        raise ForbiddenError("only an admin can create users")
    username = _free_username(session, new.username, admin=new.admin, user_id=None, current=None)
    display_name = (
        _clean_display_name(session, new.display_name, None) if new.display_name else None
    )
    if new.remote and new.password:
        raise InvalidArgumentError(
            "a remote user cannot have a password (it signs in through the identity provider)"
        )
    uid, gid, agent_user, agent_group = _agent_values(new.agent or AgentLink())
    user = User(
        username=username,
        display_name=display_name,
        admin=new.admin,
        active=new.active,
        remote=new.remote,
        password_hash=(
            NO_PASSWORD_LOGIN
            if new.remote
            else _stored_password(
                new.password, is_hashed=new.is_hashed, min_length=min_password_length
            )
            if new.password
            else None
        ),
        modified_at=utcnow(),
        agent_uid=uid,
        agent_gid=gid,
        agent_user=agent_user,
        agent_group=agent_group,
    )
    session.add(user)
    _commit(session, username)
    return user


def patch_user(
    session: Session,
    caller: User,
    user_id: int,
    patch: UserPatch,
    *,
    caller_session_id: int | None = None,
    min_password_length: int = MIN_PASSWORD_LENGTH,
) -> User:
    """Apply ``patch`` to user ``user_id`` as ``caller`` and commit; returns the user.

    Values equal to the current ones are no-ops. Every rule is checked before anything changes.
    ``caller_session_id`` is the session kept when callers change their own password; a new
    password must have at least ``min_password_length`` characters (the empty one included).
    """
    target = get_user(session, user_id)
    is_self = caller.id == target.id
    changes: dict[str, object] = {}

    def need_admin(what: str) -> None:
        if not caller.admin:
            raise ForbiddenError(f"only an admin can change {what}")

    def need_admin_or_self(what: str) -> None:
        if not caller.admin and not is_self:
            raise ForbiddenError(f"only an admin can change another user's {what}")

    admin = target.admin
    if patch.admin is not None and patch.admin != target.admin:
        need_admin("a user's admin rights")
        if not patch.admin:
            _keep_an_admin(session, target, "remove admin rights from")
        changes["admin"] = admin = patch.admin

    if patch.active is not None and patch.active != target.active:
        need_admin("whether a user is active")
        if not patch.active:
            if is_self:
                raise FailedPreconditionError(
                    "you cannot deactivate yourself (another admin can deactivate you)"
                )
            _keep_an_admin(session, target, "deactivate")
        changes["active"] = patch.active

    remote = target.remote
    if patch.remote is not None and patch.remote != target.remote:
        need_admin("whether a user is remote")
        changes["remote"] = remote = patch.remote
        if remote:
            changes["password_hash"] = NO_PASSWORD_LOGIN
        # Back to local without a new password: password login stays disabled until one is set.

    if patch.username is not None and patch.username.strip() != target.username:
        need_admin("a user's username")
        if remote:
            raise InvalidArgumentError(
                "cannot rename a remote user (its name comes from the identity provider)"
            )
        changes["username"] = _free_username(
            session, patch.username, admin=admin, user_id=target.id, current=target.username
        )

    if patch.display_name is not None and patch.display_name.strip() != target.display_name:
        need_admin_or_self("display name")
        changes["display_name"] = _clean_display_name(session, patch.display_name, target.id)

    if patch.password is not None:
        need_admin_or_self("password")
        if remote:
            raise InvalidArgumentError(
                "cannot set a password for a remote user (it signs in through the identity "
                "provider)"
            )
        changes["password_hash"] = _stored_password(
            patch.password, is_hashed=patch.is_hashed, min_length=min_password_length
        )

    if patch.agent is not None:
        need_admin("a user's agent user and group")
        values = _agent_values(patch.agent)
        current = (target.agent_uid, target.agent_gid, target.agent_user, target.agent_group)
        if values != current:
            names = ("agent_uid", "agent_gid", "agent_user", "agent_group")
            changes.update(zip(names, values, strict=True))

    if not changes:
        return target
    for name, value in changes.items():
        setattr(target, name, value)
    target.modified_at = utcnow()
    if changes.get("active") is False:
        _end_sessions(session, target.id, keep=None)
    elif "password_hash" in changes:
        _end_sessions(session, target.id, keep=caller_session_id if is_self else None)
    _commit(session, target.username)
    return target


def set_password(
    session: Session,
    caller: User,
    user_id: int,
    password: str,
    *,
    is_hashed: bool = False,
    caller_session_id: int | None = None,
    min_password_length: int = MIN_PASSWORD_LENGTH,
) -> User:
    """Set user ``user_id``'s password (admin, or the user themself) and commit; it must have
    at least ``min_password_length`` characters."""
    patch = UserPatch(password=password, is_hashed=is_hashed)
    return patch_user(
        session,
        caller,
        user_id,
        patch,
        caller_session_id=caller_session_id,
        min_password_length=min_password_length,
    )


def set_active_many(
    session: Session, caller: User, user_ids: Iterable[int], active: bool
) -> list[tuple[int, str]]:
    """(De)activate several users, each on its own; ``(id, error)`` per id, error "" if done."""
    results: list[tuple[int, str]] = []
    for user_id in user_ids:
        try:
            patch_user(session, caller, user_id, UserPatch(active=active))
        except StalwartError as exc:
            session.rollback()
            results.append((user_id, str(exc)))
        else:
            results.append((user_id, ""))
    return results
