"""Routes: login (no credentials needed), logout, me."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import Empty
from stalwart.master.api.models.users import (
    LoginRequest,
    LoginResponse,
    MeResponse,
    user_to_wire,
)
from stalwart.master.services import auth

__all__ = ["router"]

router = APIRouter(tags=["auth"])


@router.post("/auth/login", response_model=LoginResponse)
def login(body: LoginRequest, session: SessionDep, state: StateDep) -> JSONResponse:
    """Log in with a client-side-hashed (``isHashed: true``) or plain password."""
    token, user = auth.login(
        session,
        body.username,
        body.password,
        is_hashed=body.is_hashed,
        session_hours=state.settings.security.session_hours,
    )
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
