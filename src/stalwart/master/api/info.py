"""Routes: ``/info`` and ``/health`` (no auth), ``/api/v1/master`` and
``/api/v1/master/config``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from sqlalchemy import text

from stalwart import __version__
from stalwart.master.api.deps import Caller, StateDep, require_admin
from stalwart.master.api.models.info import (
    GetMasterResponse,
    InfoResponse,
    MasterConfigResponse,
)
from stalwart.master.redact import redact_config

__all__ = ["info_router", "router"]

# Determined's client compares this with its own version and warns on a mismatch; Stalwart
# speaks the 0.38.1 dialect, so it reports that version on the wire.
WIRE_VERSION = "0.38.1"

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
    return MasterConfigResponse(config=redact_config(data))
