"""Login sessions: checking passwords, issuing and revoking session tokens."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stalwart.errors import ForbiddenError, UnauthenticatedError
from stalwart.master.db.tables import User, UserSession, utcnow
from stalwart.master.services.passwords import client_hash, verify_password

__all__ = ["login", "logout", "token_sha256"]


def token_sha256(token: str) -> str:
    """How tokens are stored: only their SHA-256."""
    return hashlib.sha256(token.encode()).hexdigest()


def login(
    session: Session, username: str, password: str, *, is_hashed: bool, session_hours: int
) -> tuple[str, User]:
    """Check the credentials and open a session; returns ``(token, user)``.

    Unknown users and wrong passwords are the same 401 ("invalid credentials"); an inactive
    user is 403 "user is not active" (the official client and e2e tests match that text).
    """
    user = session.scalar(select(User).where(User.username == username))
    hashed = password if is_hashed else client_hash(password)
    if user is None or not verify_password(hashed, user.password_hash):
        raise UnauthenticatedError("invalid credentials")
    if not user.active:
        raise ForbiddenError("user is not active")
    token = secrets.token_urlsafe(32)
    now = utcnow()
    session.add(
        UserSession(
            user_id=user.id,
            token_sha256=token_sha256(token),
            created_at=now,
            expires_at=now + dt.timedelta(hours=session_hours),
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
