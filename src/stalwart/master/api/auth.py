"""Routes: login (no credentials needed), logout, me, and revoking a user's sessions.

Login is rate limited per (username, client address) by
:class:`~stalwart.master.services.login_limits.LoginLimiter` (``security.login_max_failures``
failures within ``security.login_lockout`` seconds, then 429 with ``Retry-After``); the
failures are kept in the database, so they hold across restarts and between masters.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from stalwart.errors import ForbiddenError, StalwartError
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import Empty, WireModel
from stalwart.master.api.models.users import (
    LoginRequest,
    LoginResponse,
    MeResponse,
)
from stalwart.master.api.wire.users import user_to_wire
from stalwart.master.services import auth
from stalwart.master.services.login_limits import LoginLimiter
from stalwart.master.services.users import get_user
from stalwart.master.state import MasterState

__all__ = ["RevokeSessionsResponse", "router"]

router = APIRouter(tags=["auth"])


def _limiter(request: Request, state: MasterState) -> LoginLimiter:
    """The app's login limiter, made from the settings on first use."""
    limiter: LoginLimiter | None = getattr(request.app.state, "login_limiter", None)
    if limiter is None:
        security = state.settings.security
        limiter = LoginLimiter(state.sessions, security.login_max_failures, security.login_lockout)
        request.app.state.login_limiter = limiter
    return limiter


@router.post("/auth/login", response_model=LoginResponse)
def login(
    body: LoginRequest, request: Request, session: SessionDep, state: StateDep
) -> JSONResponse:
    """Log in with a client-side-hashed (``isHashed: true``) or plain password.

    401 "invalid credentials", 403 "user is not active", 429 after too many failures.
    """
    limiter = _limiter(request, state)
    address = request.client.host if request.client else ""
    limiter.check(body.username, address)
    try:
        token, user = auth.login(
            session,
            body.username,
            body.password,
            is_hashed=body.is_hashed,
            lifetime=state.settings.security.token_lifetime,
        )
    except StalwartError:
        limiter.failed(body.username, address)
        raise
    limiter.succeeded(body.username, address)
    payload = LoginResponse(token=token, user=user_to_wire(user))
    response = JSONResponse(payload.model_dump(mode="json", by_alias=True))
    response.set_cookie("auth", token, httponly=True, samesite="lax")
    return response


@router.post("/auth/logout", response_model=Empty)
def logout(caller: CallerDep, session: SessionDep) -> Empty:
    """End the calling session; later use of its token is 401."""
    auth.logout(session, caller.session_id)
    return Empty()


@router.get("/me", response_model=MeResponse)
def me(caller: CallerDep) -> MeResponse:
    """The calling user (an allocation token resolves to the allocation's owner)."""
    return MeResponse(user=user_to_wire(caller.user))


@router.get("/auth/user", response_model=MeResponse)
def current_user(caller: CallerDep) -> MeResponse:
    """Determined's ``CurrentUser`` (the web UI's session check): the calling user."""
    return MeResponse(user=user_to_wire(caller.user))


class RevokeSessionsResponse(WireModel):
    """How many sessions were ended."""

    revoked: int


@router.delete("/users/{user_id:int}/sessions", response_model=RevokeSessionsResponse)
def revoke_sessions(user_id: int, caller: CallerDep, session: SessionDep) -> RevokeSessionsResponse:
    """End every session of a user (a Stalwart extension; admins, or users for themselves):
    all of the user's tokens answer 401 from now on, the caller's own included."""
    if not caller.user.admin and caller.user.id != user_id:
        raise ForbiddenError("only an admin can end another user's sessions")
    get_user(session, user_id)
    return RevokeSessionsResponse(revoked=auth.revoke_sessions(session, user_id))
