"""Request dependencies: the master state, a database session, and who is calling.

Credentials, in the order they are looked at (wire doc 1.4):

1. ``Grpc-Metadata-x-allocation-token: Bearer <token>``: a task; it acts as the owner of its
   allocation's task;
2. ``Authorization: Bearer <token>``: a user session, or a user's access token
   (:mod:`stalwart.master.services.access_tokens`: a revoked or expired one is 401 saying so);
3. the ``auth`` cookie: a user session. A write (not GET, HEAD, OPTIONS) with only the cookie
   must also be JSON from the master's own pages (:func:`.browser.check_cookie_write`), so
   another site cannot make a signed-in browser act for it.

Only ``/info`` and login are reachable without credentials. Every authenticated request also
passes :mod:`stalwart.master.policy` (allocation-token scope, workspace roles), here, so that no
route needs checks of its own for the resources its path names.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import ForbiddenError, UnauthenticatedError
from stalwart.master import policy
from stalwart.master.api.browser import check_cookie_write
from stalwart.master.db.tables import Allocation, Task, User, UserSession, utcnow
from stalwart.master.services import access_tokens
from stalwart.master.services.auth import token_sha256
from stalwart.master.state import MasterState, Notifier

__all__ = [
    "Caller",
    "CallerDep",
    "SessionDep",
    "StateDep",
    "endpoint_name",
    "get_caller",
    "get_session",
    "get_state",
    "long_poll",
    "require_admin",
    "user_of_token",
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
    loaded: tuple[object, ...] = field(default=(), compare=False, repr=False)
    """Rows authentication loaded (a task's allocation and task), referenced for the request:
    the session's identity map keeps only objects something refers to, and with them there
    the request's own lookups by key (:func:`stalwart.master.policy.authorize_reports`) need
    no query."""


def _bearer(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def endpoint_name(request: Request) -> str | None:
    """``module.function`` of the route serving ``request`` (None outside a route)."""
    route = request.scope.get("route")
    endpoint = getattr(route, "endpoint", None)
    if endpoint is None:
        return None
    return f"{endpoint.__module__}.{endpoint.__name__}"


ENDED_ALLOCATION_GRACE = dt.timedelta(seconds=120)
"""How long an allocation's token keeps working after the allocation ended: calls in flight
when it ended, and a batch launcher's exit report that trails the scheduler's news, still land."""


def _allocation_caller(request: Request, session: Session, token: str) -> Caller:
    # One query for the allocation, its task and the task's owner: every request a task makes
    # comes this way (its reports, its preemption long-poll, its agent's log batches).
    found = session.execute(
        select(Allocation, Task, User)
        .outerjoin(Task, Task.task_id == Allocation.task_id)
        .outerjoin(User, User.id == Task.owner_id)
        .where(Allocation.token_sha256 == token_sha256(token))
    ).one_or_none()
    if found is None:
        raise UnauthenticatedError("invalid allocation token")
    allocation, task, owner = found
    ended = allocation.end_time
    if ended is not None and utcnow() - ended > ENDED_ALLOCATION_GRACE:
        raise UnauthenticatedError(
            f"allocation {allocation.id} ended at {ended.isoformat()}: its token no longer "
            "works (a task's calls belong to its own run; a new run gets a new token)"
        )
    if task is None or owner is None:
        raise UnauthenticatedError("the allocation has no owner")
    if not owner.active:
        raise UnauthenticatedError(
            f"the owner of allocation {allocation.id}, user {owner.username}, is not active"
        )
    policy.authorize_allocation_request(
        session, allocation, task, endpoint_name(request), request.path_params
    )
    return Caller(owner, allocation_id=allocation.id, loaded=(allocation, task))


def _live_session(session: Session, state: MasterState, token: str) -> UserSession | None:
    """The user session ``token`` opens: unexpired, unrevoked, younger than
    ``security.token_lifetime``; None otherwise."""
    if not token:
        return None
    found = session.scalar(
        select(UserSession).where(UserSession.token_sha256 == token_sha256(token))
    )
    now = utcnow()
    lifetime = dt.timedelta(seconds=state.settings.security.token_lifetime)
    if found is None or found.expires_at <= now or found.created_at + lifetime <= now:
        return None
    return found


def _live_access_token(session: Session, state: MasterState, token: str) -> int | None:
    """The user id of the live access token ``token``; None when it is no access token; 401
    (saying which) when it is revoked or expired."""
    found = access_tokens.check_token(session, token, state.clock.now()) if token else None
    return found.user_id if found is not None else None


def user_of_token(session: Session, state: MasterState, token: str) -> User | None:
    """The active user a session token or access token belongs to (None: no such live token,
    or the user is inactive); for routes that authenticate outside :func:`get_caller` (the
    proxy)."""
    found = _live_session(session, state, token)
    user_id = found.user_id if found is not None else None
    if user_id is None:
        try:
            user_id = _live_access_token(session, state, token)
        except UnauthenticatedError:
            return None
    user = session.get(User, user_id) if user_id is not None else None
    return user if user is not None and user.active else None


def get_caller(request: Request, session: SessionDep) -> Caller:
    """Authenticate the request and apply :mod:`stalwart.master.policy` to it.

    401 without valid credentials (none, unknown, revoked, or older than
    ``security.token_lifetime``); 403 for an inactive user or when the policy refuses.
    """
    alloc_token = _bearer(request.headers.get("grpc-metadata-x-allocation-token"))
    if alloc_token:
        return _allocation_caller(request, session, alloc_token)
    token = _bearer(request.headers.get("authorization"))
    if not token:
        token = request.cookies.get("auth")
        if token:
            check_cookie_write(request.scope)
    if not token:
        raise UnauthenticatedError(
            "no credentials: log in first (`stalwart user login` or `det user login`)"
        )
    state: MasterState = request.app.state.master
    found = _live_session(session, state, token)
    user_id = found.user_id if found is not None else _live_access_token(session, state, token)
    if user_id is None:
        raise UnauthenticatedError(
            "invalid, expired or revoked session token: log in again "
            "(`stalwart user login` or `det user login`)"
        )
    user = session.get(User, user_id)
    if user is None:
        raise UnauthenticatedError("invalid session token: log in again")
    if not user.active:
        raise ForbiddenError("user is not active")
    reads = endpoint_name(request) in policy.READ_ROUTES
    policy.authorize_user_request(
        session,
        user,
        "GET" if reads else request.method,
        request.path_params,
        request.query_params.getlist("trialIds"),
    )
    return Caller(user, session_id=found.id if found is not None else None)


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
