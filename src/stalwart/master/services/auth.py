"""Login sessions: checking passwords, issuing and revoking session tokens.

A token is 32 random bytes (URL-safe base64); only its SHA-256 is stored. A session ends when
it is older than ``security.token_lifetime`` (checked on every request, so shortening the
setting applies to tokens already issued), when its user logs out, when an admin (or the user)
revokes the user's sessions, and when the user is deactivated or their password changes
(:mod:`stalwart.master.services.users`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stalwart.errors import ForbiddenError, UnauthenticatedError
from stalwart.master.db.tables import User, UserSession, utcnow
from stalwart.master.services.passwords import (
    client_hash,
    hash_password,
    needs_rehash,
    verify_password,
)

__all__ = ["login", "logout", "revoke_sessions", "token_sha256"]


def token_sha256(token: str) -> str:
    """How tokens are stored: only their SHA-256."""
    return hashlib.sha256(token.encode()).hexdigest()


def login(
    session: Session, username: str, password: str, *, is_hashed: bool, lifetime: float
) -> tuple[str, User]:
    """Check the credentials and open a session of ``lifetime`` seconds; ``(token, user)``.

    Unknown users and wrong passwords are the same 401 ("invalid credentials"); an inactive
    user is 403 "user is not active" (the official client and e2e tests match that text). A
    stored hash made otherwise than today (an older master's scrypt, other argon2id parameters)
    is replaced by a current one.

    Every attempt runs exactly one password hash: an unknown user and a user without a password
    are checked against a dummy hash (:func:`verify_password`), so the time a login takes does
    not tell them from a real account.
    """
    user = session.scalar(select(User).where(User.username == username))
    hashed = password if is_hashed else client_hash(password)
    stored = user.password_hash if user is not None else None
    if not verify_password(hashed, stored) or user is None:
        raise UnauthenticatedError("invalid credentials")
    if not user.active:
        raise ForbiddenError("user is not active")
    if user.password_hash is not None and needs_rehash(user.password_hash):
        user.password_hash = hash_password(hashed)
    token = secrets.token_urlsafe(32)
    now = utcnow()
    session.add(
        UserSession(
            user_id=user.id,
            token_sha256=token_sha256(token),
            created_at=now,
            expires_at=now + dt.timedelta(seconds=lifetime),
        )
    )
    user.last_auth_at = now
    session.commit()
    return token, user


def logout(session: Session, session_id: int | None) -> None:
    """End one session (its token stops working). Idempotent."""
    if session_id is not None:
        session.execute(delete(UserSession).where(UserSession.id == session_id))
        session.commit()


def revoke_sessions(session: Session, user_id: int) -> int:
    """End every session of user ``user_id`` and revoke their active access tokens (all their
    tokens answer 401); how many ended."""
    from stalwart.master.services.access_tokens import revoke_user_tokens

    result = session.execute(delete(UserSession).where(UserSession.user_id == user_id))
    revoked = revoke_user_tokens(session, user_id, utcnow())
    session.commit()
    return int(getattr(result, "rowcount", 0) or 0) + revoked
