"""Wire models of the master's identity and settings: ``/info``, ``/api/v1/master`` and
``/api/v1/master/config`` (the routes are in ``stalwart.master.api.info``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from stalwart import __version__
from stalwart.master.api.models.common import WireModel, WireRequest

__all__ = [
    "WIRE_VERSION",
    "FieldMask",
    "GetMasterResponse",
    "InfoResponse",
    "LogConfig",
    "MasterConfigPatch",
    "MasterConfigResponse",
    "PatchMasterConfigRequest",
    "Telemetry",
]

WIRE_VERSION = "0.38.1"
"""The Determined version Stalwart speaks on the wire: ``/info``, ``/api/v1/master`` and every
agent's ``version`` answer it. The official client compares it with its own and warns on a
mismatch (``det version``); Stalwart's own version travels as ``stalwart_version``."""


class Telemetry(BaseModel):
    """``aproto.TelemetryInfo`` as ``/info`` sends it (snake_case keys)."""

    enabled: bool = Field(default=False, description="Telemetry is never collected.")
    otel_enabled: bool = Field(default=False, description="No OpenTelemetry export.")
    otel_endpoint: str = Field(default="", description="Unused.")


class InfoResponse(BaseModel):
    """``GET /info``: Determined's ``aproto.MasterInfo``, whose keys are snake_case on the wire
    (it is not a gRPC message). The official client reads ``version`` (``det version`` and its
    version check), ``cluster_id`` / ``master_id`` and ``sso_providers`` (``det auth
    list-providers``: the key must be present; null means none)."""

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
    rbac_enabled: bool = Field(
        default=True,
        description="Role assignments are served (Stalwart's four workspace roles; the "
        "official client's `det user-group` and `det rbac` need this).",
    )
    user_management_enabled: bool = Field(default=True, description="Users are managed here.")
    product: str = Field(default="PRODUCT_UNSPECIFIED", description="Product flavour.")
    feature_switches: list[str] = Field(default_factory=list, description="None.")
    stalwart_version: str | None = Field(
        default=None,
        description="Stalwart's own version (always sent by Stalwart; absent from Determined).",
    )


class MasterConfigResponse(WireModel):
    config: dict[str, Any] = Field(description="The master's settings (secrets removed).")


class LogConfig(WireRequest):
    """``v1LogConfig``."""

    level: str | None = Field(default=None, description="A v1LogLevel, e.g. LOG_LEVEL_DEBUG.")
    color: bool | None = Field(default=None, description="Coloured log output.")


class MasterConfigPatch(WireRequest):
    """``v1Config``: the part of the master's config that can change while it runs."""

    log: LogConfig | None = Field(default=None, description="Logging.")


class FieldMask(WireRequest):
    """``protobufFieldMask``."""

    paths: list[str] = Field(default_factory=list, description="Dotted fields to change.")


class PatchMasterConfigRequest(WireRequest):
    """``v1PatchMasterConfigRequest`` (``det master config set``)."""

    config: MasterConfigPatch | None = Field(default=None, description="The new values.")
    field_mask: FieldMask | None = Field(default=None, description="Which fields to change.")
