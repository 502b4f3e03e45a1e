"""Access tokens: long-lived tokens a user (or an admin, for any user) creates, lists, edits and
revokes (``det token ...``), and that sign requests like a login session's token.

Rules (Determined's, with its role-based access control):

- a user creates, lists, describes, edits and revokes **their own** tokens; an admin does so
  for everyone's. Someone else's token is 403 to a non-admin (listing: only one's own are
  shown unless the caller is an admin);
- a token is 32 random bytes (URL-safe base64, never starting with ``-``), shown once, when
  created; only its SHA-256 is stored;
- ``lifespan`` is a Go duration (``"720h"``, ``"90m"``, ``"1h30m"``); absent means
  :data:`DEFAULT_LIFESPAN` (30 days); ``"-1"`` means :data:`MAX_LIFESPAN` (the official CLI's
  ``--expiration-days -1``); anything else negative or unparseable is 400;
- a token works while it is neither revoked nor expired and its user is active
  (:func:`check_token`, which says which it is when it does not); a revoked or expired token
  can be neither edited nor revoked again (400);
- rows are never deleted: revoking sets ``revoked_at``. Listing hides inactive tokens (revoked
  or expired) unless ``show_inactive``.

Times come from the caller (the master's clock), so tests move them without waiting.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from stalwart.errors import (
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
    UnauthenticatedError,
)
from stalwart.master.db.tables import AccessToken, User
from stalwart.master.services.auth import token_sha256

__all__ = [
    "DEFAULT_LIFESPAN",
    "MAX_LIFESPAN",
    "TokenPatch",
    "check_token",
    "create_token",
    "get_token",
    "is_active",
    "list_tokens",
    "parse_lifespan",
    "patch_token",
    "revoke_user_tokens",
]

DEFAULT_LIFESPAN = dt.timedelta(days=30)
"""A new token's lifespan when none is asked for (Determined's default)."""
MAX_LIFESPAN = dt.timedelta(days=365 * 100)
"""``lifespan: "-1"``: as long as a token can live (a hundred years)."""

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_lifespan(value: str | None) -> dt.timedelta:
    """A Go duration string as a timedelta (see the module docstring); 400 if invalid."""
    if value is None or value == "":
        return DEFAULT_LIFESPAN
    text = value.strip()
    if text == "-1":
        return MAX_LIFESPAN
    problem = InvalidArgumentError(
        f"lifespan {value!r} is not a Go duration with a positive value "
        '(e.g. "720h", "90m", "1h30m"; "-1" for the longest)'
    )
    sign, body = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
    if body == "0":
        return dt.timedelta(0)
    seconds, pos = 0.0, 0
    while pos < len(body):
        found = _PART.match(body, pos)
        if found is None:
            raise problem
        seconds += float(found.group(1)) * _UNITS[found.group(2)]
        pos = found.end()
    if not body or sign < 0:
        raise problem
    span = dt.timedelta(seconds=seconds)
    if span > MAX_LIFESPAN:
        raise InvalidArgumentError(
            f"lifespan {value!r} is longer than the longest a token may live "
            f'({MAX_LIFESPAN.days} days; "-1" asks for that)'
        )
    return span


def is_active(token: AccessToken, now: dt.datetime) -> bool:
    """Neither revoked nor expired at ``now``."""
    return token.revoked_at is None and token.expires_at > now


def _may_manage(caller: User, owner_id: int) -> bool:
    return caller.admin or caller.id == owner_id


def create_token(
    session: Session,
    caller: User,
    user_id: int,
    *,
    lifespan: str | None,
    description: str | None,
    now: dt.datetime,
) -> tuple[str, AccessToken]:
    """A new token for user ``user_id``; ``(token, row)``; commits. 404 for no such user, 403
    for another user's token unless the caller is an admin, 400 for a bad lifespan."""
    owner = session.get(User, user_id)
    if owner is None:
        raise NotFoundError(f"user {user_id} not found")
    if not _may_manage(caller, owner.id):
        raise ForbiddenError("only an admin can create an access token for another user")
    if not owner.active:
        raise FailedPreconditionError(f"user {owner.username} is not active")
    span = parse_lifespan(lifespan)
    token = _new_token()
    row = AccessToken(
        user_id=owner.id,
        token_sha256=token_sha256(token),
        description=description or None,
        created_at=now,
        expires_at=now + span,
    )
    session.add(row)
    session.commit()
    return token, row


def list_tokens(
    session: Session,
    caller: User,
    *,
    username: str | None = None,
    token_ids: Sequence[int] = (),
    show_inactive: bool = False,
    now: dt.datetime,
) -> list[AccessToken]:
    """Tokens the caller may see, by id: a non-admin sees only their own (asking for another
    user's by name is 403); ``token_ids`` filters; inactive ones only with ``show_inactive``.
    An unknown ``username`` is 404."""
    query = select(AccessToken).order_by(AccessToken.id)
    if username:
        owner = session.scalar(select(User).where(User.username == username))
        if owner is None:
            raise NotFoundError(f"user '{username}' not found")
        if not _may_manage(caller, owner.id):
            raise ForbiddenError("only an admin can see another user's access tokens")
        query = query.where(AccessToken.user_id == owner.id)
    elif not caller.admin:
        query = query.where(AccessToken.user_id == caller.id)
    wanted = [i for i in token_ids if i > 0]
    if wanted:
        query = query.where(AccessToken.id.in_(wanted))
    if not show_inactive:
        query = query.where(AccessToken.revoked_at.is_(None), AccessToken.expires_at > now)
    return list(session.scalars(query))


def get_token(session: Session, caller: User, token_id: int) -> AccessToken:
    """One token the caller may manage: 404 if there is none, 403 if it is another user's
    and the caller is not an admin."""
    row = session.get(AccessToken, token_id)
    if row is None:
        raise NotFoundError(f"access token {token_id} not found")
    if not _may_manage(caller, row.user_id):
        raise ForbiddenError(
            f"access token {token_id} is another user's: only an admin can change it"
        )
    return row


def _new_token() -> str:
    """32 random bytes, URL-safe base64, never starting with ``-`` (command lines would take
    it for an option: ``det token login TOKEN``)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


@dataclass(frozen=True)
class TokenPatch:
    """An edit: a new description (None: unchanged) and/or revocation."""

    description: str | None = None
    revoke: bool = False


def patch_token(
    session: Session, caller: User, token_id: int, patch: TokenPatch, *, now: dt.datetime
) -> AccessToken:
    """Edit or revoke a token (see :func:`get_token` for who may); commits. An inactive token
    (already revoked, or expired) is 400: there is nothing left to change."""
    row = get_token(session, caller, token_id)
    if row.revoked_at is not None:
        raise FailedPreconditionError(f"access token {token_id} is already revoked")
    if row.expires_at <= now:
        raise FailedPreconditionError(f"access token {token_id} has expired")
    if patch.description is not None:
        row.description = patch.description
    if patch.revoke:
        row.revoked_at = now
    session.commit()
    return row


def revoke_user_tokens(session: Session, user_id: int, now: dt.datetime) -> int:
    """Revoke every active token of a user (no commit); how many."""
    result = session.execute(
        update(AccessToken)
        .where(
            AccessToken.user_id == user_id,
            AccessToken.revoked_at.is_(None),
            AccessToken.expires_at > now,
        )
        .values(revoked_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def check_token(session: Session, token: str, now: dt.datetime) -> AccessToken | None:
    """The live access token ``token`` is; None if it is no access token at all. A revoked or
    expired one is 401 with a message that says which, and what to do."""
    row = session.scalar(select(AccessToken).where(AccessToken.token_sha256 == token_sha256(token)))
    if row is None:
        return None
    if row.revoked_at is not None:
        raise UnauthenticatedError(
            f"access token {row.id} was revoked at {_when(row.revoked_at)}: create a new one "
            "(`det token create` or `stalwart token create`) or log in"
        )
    if row.expires_at <= now:
        raise UnauthenticatedError(
            f"access token {row.id} expired at {_when(row.expires_at)}: create a new one "
            "(`det token create` or `stalwart token create`) or log in"
        )
    return row


def _when(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
