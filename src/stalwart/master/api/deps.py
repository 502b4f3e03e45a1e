"""Request dependencies: the master state, a database session, and who is calling.

Credentials, in the order they are looked at (wire doc 1.4):

1. ``Grpc-Metadata-x-allocation-token: Bearer <token>``: a task; it acts as the owner of its
   allocation's task;
2. ``Authorization: Bearer <token>``: a user session;
3. the ``auth`` cookie: a user session.

Only ``/info`` and login are reachable without credentials.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import ForbiddenError, UnauthenticatedError
from stalwart.master.db.tables import Allocation, Task, User, UserSession, utcnow
from stalwart.master.services.auth import token_sha256
from stalwart.master.state import MasterState, Notifier

__all__ = [
    "Caller",
    "CallerDep",
    "SessionDep",
    "StateDep",
    "get_caller",
    "get_session",
    "get_state",
    "long_poll",
    "require_admin",
]


def get_state(request: Request) -> MasterState:
    """The running master's state."""
    state: MasterState = request.app.state.master
    return state


StateDep = Annotated[MasterState, Depends(get_state)]


def get_session(state: StateDep) -> Iterator[Session]:
    """One database session per request, closed afterwards (services commit explicitly)."""
    with state.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


@dataclass(frozen=True)
class Caller:
    """The authenticated caller: a user, and the allocation when a task calls."""

    user: User
    allocation_id: str | None = None
    session_id: int | None = None


def _bearer(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def get_caller(request: Request, session: SessionDep) -> Caller:
    """Authenticate the request or raise UnauthenticatedError (401)."""
    alloc_token = _bearer(request.headers.get("grpc-metadata-x-allocation-token"))
    if alloc_token:
        allocation = session.scalar(
            select(Allocation).where(Allocation.token_sha256 == token_sha256(alloc_token))
        )
        if allocation is None:
            raise UnauthenticatedError("invalid allocation token")
        task = session.get(Task, allocation.task_id)
        owner = session.get(User, task.owner_id) if task and task.owner_id else None
        if owner is None:
            raise UnauthenticatedError("the allocation has no owner")
        return Caller(owner, allocation_id=allocation.id)
    token = _bearer(request.headers.get("authorization")) or request.cookies.get("auth")
    if not token:
        raise UnauthenticatedError("no credentials: log in first (`stalwart user login`)")
    found = session.scalar(
        select(UserSession).where(UserSession.token_sha256 == token_sha256(token))
    )
    if found is None or found.expires_at <= utcnow():
        raise UnauthenticatedError("invalid or expired session token: log in again")
    user = session.get(User, found.user_id)
    if user is None:
        raise UnauthenticatedError("invalid session token: log in again")
    if not user.active:
        raise ForbiddenError("user is not active")
    return Caller(user, session_id=found.id)


CallerDep = Annotated[Caller, Depends(get_caller)]


def require_admin(caller: CallerDep) -> Caller:
    """The caller, if an admin; 403 otherwise."""
    if not caller.user.admin:
        raise ForbiddenError("only an admin can do this")
    return caller


async def long_poll(
    request: Request, notifier: Notifier, keys: Sequence[str], timeout: float
) -> bool:
    """Wait up to ``timeout`` seconds for a notification of any of ``keys``.

    True when notified; False on timeout or as soon as the client has gone away (the request's
    body has been read, so the next ASGI message is the disconnect), so an abandoned long-poll
    neither holds the server until its end nor does work when a notification comes.
    """
    notified = asyncio.ensure_future(notifier.wait_any(list(keys), timeout))
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({notified, gone}, return_when=asyncio.FIRST_COMPLETED)
        return notified.done() and not gone.done() and notified.result()
    finally:
        notified.cancel()
        gone.cancel()


async def _disconnect(request: Request) -> None:
    """Return once the client has closed the connection."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
