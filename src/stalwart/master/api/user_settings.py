"""Routes: the web UI's per-user settings (``GET|POST /users/setting``, ``POST
/users/setting/reset``; ``bindings.get_GetUserSetting``, ``post_PostUserSetting``,
``post_ResetUserSetting``): each caller reads and writes their own; see
:mod:`stalwart.master.services.user_settings`."""

from __future__ import annotations

from fastapi import APIRouter

from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import Empty
from stalwart.master.api.models.users import (
    GetUserSettingResponse,
    PostUserSettingRequest,
    UserWebSetting,
)
from stalwart.master.services import user_settings as svc

__all__ = ["router"]

router = APIRouter(tags=["users"])


@router.get("/users/setting", response_model=GetUserSettingResponse)
def get_user_settings(caller: CallerDep, session: SessionDep) -> GetUserSettingResponse:
    """The caller's settings."""
    return GetUserSettingResponse(
        settings=[
            UserWebSetting(key=s.key, value=s.value, storage_path=s.storage_path)
            for s in svc.get_settings(session, caller.user.id)
        ]
    )


@router.post("/users/setting", response_model=Empty)
def post_user_settings(
    body: PostUserSettingRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """Store the caller's settings (an empty value removes one)."""
    svc.put_settings(
        session,
        caller.user.id,
        [svc.Setting(s.key, s.value or "", s.storage_path or "") for s in body.settings],
    )
    return Empty()


@router.post("/users/setting/reset", response_model=Empty)
def reset_user_settings(caller: CallerDep, session: SessionDep) -> Empty:
    """Remove all of the caller's settings."""
    svc.reset_settings(session, caller.user.id)
    return Empty()
