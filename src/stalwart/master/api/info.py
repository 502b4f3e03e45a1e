"""Routes: ``/info`` (no auth), ``/api/v1/master`` and ``/api/v1/master/config``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field

from stalwart import __version__
from stalwart.master.api.deps import Caller, StateDep, get_caller, require_admin
from stalwart.master.api.models.common import WireModel
from stalwart.master.redact import redact_config

__all__ = ["info_router", "router"]

# Determined's client compares this with its own version and warns on a mismatch; Stalwart
# speaks the 0.38.1 dialect, so it reports that version on the wire.
WIRE_VERSION = "0.38.1"

info_router = APIRouter()
router = APIRouter()


class Telemetry(WireModel):
    enabled: bool = Field(default=False, description="Telemetry is never collected.")
    segment_key: str = Field(default="", description="Unused.")


class InfoResponse(WireModel):
    version: str = Field(description="The Determined wire version the master speaks.")
    master_id: str = Field(description="This master process.")
    cluster_id: str = Field(description="This cluster (stable across restarts).")
    cluster_name: str = Field(description="The configured cluster name.")
    telemetry: Telemetry = Field(default_factory=Telemetry, description="Telemetry settings.")
    sso_providers: list[Any] | None = Field(default=None, description="No SSO providers.")
    stalwart_version: str = Field(default=__version__, description="Stalwart's own version.")


class GetMasterResponse(WireModel):
    version: str = Field(description="The Determined wire version the master speaks.")
    master_id: str = Field(description="This master process.")
    cluster_id: str = Field(description="This cluster.")
    cluster_name: str = Field(description="The configured cluster name.")
    has_custom_logo: bool = Field(default=False, description="No custom logo.")
    strict_job_queue_control: bool = Field(default=False, description="Not enforced.")
    telemetry_enabled: bool = Field(default=False, description="Telemetry is off.")
    rbac_enabled: bool = Field(default=False, description="RBAC is not enabled.")
    user_management_enabled: bool = Field(default=True, description="Users are managed here.")
    product: str = Field(default="PRODUCT_UNSPECIFIED", description="Product flavour.")
    feature_switches: list[str] = Field(default_factory=list, description="None.")
    stalwart_version: str = Field(default=__version__, description="Stalwart's own version.")


@info_router.get("/info", response_model=InfoResponse)
def get_info(state: StateDep) -> InfoResponse:
    """Version and identity of the master; reachable without credentials."""
    return InfoResponse(
        version=WIRE_VERSION,
        master_id=state.master_id,
        cluster_id=state.cluster_id,
        cluster_name=state.settings.cluster_name,
    )


@router.get("/master", response_model=GetMasterResponse, dependencies=[Depends(get_caller)])
def get_master(state: StateDep) -> GetMasterResponse:
    """What `det master info` prints."""
    return GetMasterResponse(
        version=WIRE_VERSION,
        master_id=state.master_id,
        cluster_id=state.cluster_id,
        cluster_name=state.settings.cluster_name,
    )


class MasterConfigResponse(WireModel):
    config: dict[str, Any] = Field(description="The master's settings (secrets removed).")


@router.get("/master/config", response_model=MasterConfigResponse)
def get_master_config(
    state: StateDep, _: Annotated[Caller, Depends(require_admin)]
) -> MasterConfigResponse:
    """The master's effective settings, for admins; passwords are never shown."""
    data = state.settings.model_dump(mode="json")
    data.get("security", {}).pop("initial_user_password", None)
    data["checkpoint_storage"] = state.settings.default_checkpoint_storage
    return MasterConfigResponse(config=redact_config(data))
