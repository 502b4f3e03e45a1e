"""Routes: ``/info`` and ``/health`` (no auth), ``/api/v1/master`` and
``/api/v1/master/config``."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from sqlalchemy import text

from stalwart import __version__
from stalwart.errors import InvalidArgumentError
from stalwart.master.api.deps import Caller, StateDep, require_admin
from stalwart.master.api.models.common import Empty
from stalwart.master.api.models.info import (
    WIRE_VERSION,
    GetMasterResponse,
    InfoResponse,
    MasterConfigResponse,
    PatchMasterConfigRequest,
)
from stalwart.master.redact import redact_config

__all__ = ["info_router", "router"]

info_router = APIRouter()
router = APIRouter()


@info_router.get("/info", response_model=InfoResponse)
def get_info(state: StateDep) -> InfoResponse:
    """Version and identity of the master; reachable without credentials."""
    return InfoResponse(
        version=WIRE_VERSION,
        master_id=state.master_id,
        cluster_id=state.cluster_id,
        cluster_name=state.settings.cluster_name,
    )


@info_router.get("/health")
def get_health(state: StateDep) -> JSONResponse:
    """Determined's health check (``bindings.get_health``, load balancers): ``{"status",
    "database", "resource_managers": [{"cluster_name", "status"}]}``, each ``up`` or ``down``;
    200 when everything is up, else 503. The resource manager is up while the master runs;
    the database is up when it answers a query. Reachable without credentials."""
    database = "up"
    try:
        with state.sessions() as session:
            session.execute(text("SELECT 1"))
    except Exception:  # any failure to reach the database is its being down
        database = "down"
    managers = [{"cluster_name": state.settings.cluster_name, "status": "up"}]
    body = {"status": database, "database": database, "resource_managers": managers}
    return JSONResponse(body, status_code=200 if database == "up" else 503)


@router.get("/master", response_model=GetMasterResponse)
def get_master(state: StateDep) -> GetMasterResponse:
    """What `det master info` prints; reachable without credentials, as on Determined (the
    official client reads the feature flags here before logging in: ``det user-group`` and
    ``det rbac`` check ``rbacEnabled``). It tells no more than ``/info``."""
    return GetMasterResponse(
        version=WIRE_VERSION,
        master_id=state.master_id,
        cluster_id=state.cluster_id,
        cluster_name=state.settings.cluster_name,
        stalwart_version=__version__,
    )


@router.get("/master/config", response_model=MasterConfigResponse)
def get_master_config(
    state: StateDep, _: Annotated[Caller, Depends(require_admin)]
) -> MasterConfigResponse:
    """The master's effective settings, for admins; passwords are never shown."""
    data = state.settings.model_dump(mode="json")
    data.get("security", {}).pop("initial_user_password", None)
    data["checkpoint_storage"] = state.settings.default_checkpoint_storage
    data.setdefault("feature_switches", [])  # Determined's key; Stalwart has no switches
    data["log"] = {"level": _level_name(), "color": False}
    return MasterConfigResponse(config=redact_config(data))


# Determined's log levels (v1LogLevel) as Python's; Python has no TRACE, DEBUG is the nearest.
_LEVELS = {
    "LOG_LEVEL_TRACE": logging.DEBUG,
    "LOG_LEVEL_DEBUG": logging.DEBUG,
    "LOG_LEVEL_INFO": logging.INFO,
    "LOG_LEVEL_WARNING": logging.WARNING,
    "LOG_LEVEL_ERROR": logging.ERROR,
    "LOG_LEVEL_CRITICAL": logging.CRITICAL,
}


def _level_name() -> str:
    """The ``stalwart`` loggers' effective level, as Determined's config spells it (``info``)."""
    return logging.getLevelName(logging.getLogger("stalwart").getEffectiveLevel()).lower()


@router.patch("/master/config", response_model=Empty)
def patch_master_config(
    body: PatchMasterConfigRequest, caller: Annotated[Caller, Depends(require_admin)]
) -> Empty:
    """Change the master's log level while it runs (``det master config set --log.level``;
    admins only). The change lasts until the master restarts, as on Determined. ``log.level``
    sets the level of the ``stalwart`` loggers, so the master's log (``det master logs``) and
    its stderr get that level's records from then on (TRACE is DEBUG). ``log.color`` is
    refused: Stalwart's log has no colours. Any other field is a 400 naming it; nothing
    changes unless every named field can."""
    paths = body.field_mask.paths if body.field_mask else []
    if not paths:
        raise InvalidArgumentError(
            "name the fields to change in fieldMask.paths (Stalwart can change log.level)"
        )
    for path in paths:
        if path == "log.color":
            raise InvalidArgumentError(
                "log.color cannot be changed: Stalwart's master log has no colours (only "
                "log.level can be changed while the master runs)"
            )
        if path != "log.level":
            raise InvalidArgumentError(
                f"unsupported or invalid field: {path} (only log.level can be changed while "
                "the master runs)"
            )
    level = body.config.log.level if body.config and body.config.log else None
    if level not in _LEVELS:
        raise InvalidArgumentError(f"log.level must be one of {', '.join(_LEVELS)} (got {level!r})")
    logging.getLogger("stalwart").setLevel(_LEVELS[level])
    logging.getLogger("stalwart.master").info(
        "user %s set the master's log level to %s", caller.user.username, level
    )
    return Empty()
