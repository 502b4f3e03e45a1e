"""The ``environment`` section: the task's image, variables, ports and container options.

Contract:

- ``image`` and ``environment_variables`` accept Determined's two forms, a value for every device
  (``image: repo/img:tag``, ``environment_variables: [A=1]``) or a per-device map with ``cpu``,
  ``cuda`` and ``rocm`` keys. ``gpu`` is the pre-ROCm name of ``cuda`` and is read only when
  ``cuda`` is absent (or null). Validation normalizes both to the per-device models
  :class:`EnvironmentImage` and :class:`EnvironmentVariables`, the form Determined itself stores.
- A device without an image stays ``None`` here. The default image is chosen at task time by
  :mod:`stalwart.environments` (it depends on ``framework`` and the slot type), never by the
  config model.
- Nothing in this module merges layers or reads other sources: that is :mod:`stalwart.config.merge`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, GetJsonSchemaHandler, field_validator, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError
from pydantic_core import core_schema as cs

from stalwart.config.base import ConfigModel

__all__ = [
    "DEVICE_TYPES",
    "POD_SPEC_FIXED_CONTAINER",
    "EnvironmentConfig",
    "EnvironmentImage",
    "EnvironmentVariables",
    "ProxyPort",
    "RegistryAuth",
]

DEVICE_TYPES = ("cpu", "cuda", "rocm")
"""The slot types a per-device map has keys for (``gpu`` is read as ``cuda``)."""

POD_SPEC_FIXED_CONTAINER = "determined-container"
"""The name of the pod-spec container that runs the task; most of its fields are Stalwart's."""

_FIXED_CONTAINER_FIELDS: dict[str, str] = {
    "image": "set environment.image instead",
    "command": "the task's command is fixed",
    "args": "the task's arguments are fixed",
    "working_dir": "the working directory is fixed",
    "ports": "set environment.ports or environment.proxy_ports instead",
    "env_from": "set environment.environment_variables instead",
    "env": "set environment.environment_variables instead",
    "liveness_probe": "probes are managed by Stalwart",
    "readiness_probe": "probes are managed by Stalwart",
    "startup_probe": "probes are managed by Stalwart",
    "lifecycle": "the container lifecycle is managed by Stalwart",
    "termination_message_path": "the termination message is managed by Stalwart",
    "termination_message_policy": "the termination message is managed by Stalwart",
    "image_pull_policy": "set environment.force_pull_image instead",
    "security_context": "set environment.add_capabilities / drop_capabilities instead",
}
"""Fields of the task container in ``pod_spec`` that Determined refuses, with the reason.

The keys are spelled as in Determined's schema (snake_case), so they match exactly what
Determined refuses and no more.
"""

_FIXED_POD_FIELDS: dict[str, str] = {
    "name": "the pod name is not configurable",
    "name_space": "the pod namespace is not configurable",
}


def _per_device_map(value: Mapping[str, Any]) -> dict[str, Any]:
    """``{cpu, cuda, rocm, gpu}`` -> ``{cpu, cuda, rocm}``, ``gpu`` filling an absent ``cuda``."""
    out = {k: v for k, v in value.items() if k != "gpu"}
    if out.get("cuda") is None and value.get("gpu") is not None:
        out["cuda"] = value["gpu"]
    return out


def _shorthand_json_schema(
    shorthand: JsonSchemaValue,
    core_schema: cs.CoreSchema,
    handler: GetJsonSchemaHandler,
    legacy_gpu: JsonSchemaValue,
) -> JsonSchemaValue:
    """In validation mode, document both accepted forms: the shorthand and the map (with gpu)."""
    schema = handler.resolve_ref_schema(handler(core_schema))
    if handler.mode != "validation":
        return schema
    as_map = dict(schema)
    as_map["properties"] = {
        **schema.get("properties", {}),
        "gpu": {**legacy_gpu, "description": "Legacy name of `cuda`, read only without `cuda`."},
    }
    as_map.pop("description", None)
    out: JsonSchemaValue = {"anyOf": [shorthand, as_map]}
    for key in ("title", "description"):
        if key in schema:
            out[key] = schema[key]
    return out


class EnvironmentImage(ConfigModel):
    """The container image per slot type.

    Accepts a string (the same image for every device) or a map of ``cpu`` / ``cuda`` / ``rocm``
    (``gpu`` is read as ``cuda`` when ``cuda`` is not given). A device left unset is ``None``:
    Stalwart picks its default image at task time.
    """

    cpu: str | None = Field(
        default=None,
        description="Image for CPU-only tasks (no GPU slots). Unset: Stalwart's default image.",
    )
    cuda: str | None = Field(
        default=None,
        description="Image for tasks on NVIDIA GPUs. Unset: Stalwart's default image.",
    )
    rocm: str | None = Field(
        default=None,
        description="Image for tasks on AMD GPUs. Unset: Stalwart's default image.",
    )

    @model_validator(mode="before")
    @classmethod
    def _accept_string_and_gpu(cls, data: Any) -> Any:
        if isinstance(data, str):
            return dict.fromkeys(DEVICE_TYPES, data)
        if isinstance(data, Mapping):
            return _per_device_map(data)
        if isinstance(data, EnvironmentImage):
            return data
        raise PydanticCustomError(
            "image_type",
            "expected an image name or a map of cpu/cuda/rocm to image names",
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: cs.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _shorthand_json_schema(
            {"type": "string", "description": "One image for every slot type."},
            core_schema,
            handler,
            {"type": ["string", "null"]},
        )


class EnvironmentVariables(ConfigModel):
    """Environment variables (``NAME=value`` strings) per slot type.

    Accepts a list (the same variables for every device) or a map of ``cpu`` / ``cuda`` /
    ``rocm`` to lists (``gpu`` is read as ``cuda`` when ``cuda`` is not given). Later entries
    override earlier ones with the same name.
    """

    cpu: list[str] = Field(
        default_factory=list, description="Variables for CPU-only tasks, as `NAME=value`."
    )
    cuda: list[str] = Field(
        default_factory=list, description="Variables for tasks on NVIDIA GPUs, as `NAME=value`."
    )
    rocm: list[str] = Field(
        default_factory=list, description="Variables for tasks on AMD GPUs, as `NAME=value`."
    )

    @model_validator(mode="before")
    @classmethod
    def _accept_list_and_gpu(cls, data: Any) -> Any:
        if isinstance(data, list):
            return {key: list(data) for key in DEVICE_TYPES}
        if isinstance(data, Mapping):
            return _per_device_map(data)
        if isinstance(data, EnvironmentVariables):
            return data
        raise PydanticCustomError(
            "environment_variables_type",
            "expected a list of NAME=value strings or a map of cpu/cuda/rocm to such lists",
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: cs.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _shorthand_json_schema(
            {
                "type": "array",
                "items": {"type": "string"},
                "description": "The same variables for every slot type.",
            },
            core_schema,
            handler,
            {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        )


class RegistryAuth(ConfigModel):
    """Credentials for pulling the image from a private registry (Docker's ``AuthConfig``)."""

    username: str | None = Field(default=None, description="Registry user name.")
    password: str | None = Field(default=None, description="Registry password.")
    auth: str | None = Field(
        default=None, description="Base64 of `username:password`, instead of the two fields."
    )
    email: str | None = Field(
        default=None, description="E-mail address; accepted for Docker compatibility, unused."
    )
    serveraddress: str | None = Field(
        default=None,
        description="The registry these credentials are for (e.g. `https://index.docker.io/v1/`).",
    )
    identitytoken: str | None = Field(
        default=None, description="A token to obtain an access token for the registry."
    )
    registrytoken: str | None = Field(
        default=None, description="A bearer token sent to the registry as is."
    )


class ProxyPort(ConfigModel):
    """A port of the task that the master proxies (like a notebook's)."""

    proxy_port: int = Field(description="The port inside the task to proxy.")
    proxy_tcp: bool = Field(
        default=False, description="Proxy raw TCP instead of HTTP (for non-HTTP services)."
    )
    unauthenticated: bool = Field(
        default=False, description="Allow access through the proxy without logging in."
    )
    default_service_id: bool = Field(
        default=False,
        description="Serve this port at the task's own proxy address instead of at "
        "`<task id>:<port>`.",
    )


class EnvironmentConfig(ConfigModel):
    """Where and how the task runs: image, variables, ports, registry and container options."""

    image: EnvironmentImage = Field(
        default_factory=EnvironmentImage,
        description="Container image: one name for every slot type, or a map of "
        "`cpu`/`cuda`/`rocm` (legacy `gpu` = `cuda`). Unset devices use Stalwart's default "
        "image for the task's framework.",
    )
    environment_variables: EnvironmentVariables = Field(
        default_factory=EnvironmentVariables,
        description="Environment variables as `NAME=value`: a list for every slot type, or a map "
        "of `cpu`/`cuda`/`rocm` (legacy `gpu` = `cuda`) to lists.",
    )
    ports: dict[str, int] = Field(
        default_factory=dict,
        description="Named ports the task listens on (name -> port), made reachable between the "
        "task's containers.",
    )
    proxy_ports: list[ProxyPort] = Field(
        default_factory=list, description="Ports of the task the master proxies."
    )
    force_pull_image: bool = Field(
        default=False,
        description="Pull the image even if it is already present. Ignored where the task runs "
        "without a container.",
    )
    registry_auth: RegistryAuth | None = Field(
        default=None, description="Credentials for a private image registry."
    )
    pod_spec: dict[str, Any] | None = Field(
        default=None,
        description="A Kubernetes Pod (free-form) the task's pod is built on; used only by the "
        "Kubernetes resource manager. The `determined-container` container may not set image, "
        "command, env, probes or security context.",
    )
    add_capabilities: list[str] = Field(
        default_factory=list,
        description="Linux capabilities to add to the task container (e.g. `IPC_LOCK`). Ignored "
        "where the task runs without a container.",
    )
    drop_capabilities: list[str] = Field(
        default_factory=list,
        description="Linux capabilities to drop from the task container. Ignored where the task "
        "runs without a container.",
    )
    framework: Literal["pytorch", "tensorflow", "auto"] = Field(
        default="auto",
        description="Stalwart addition: picks the default image family for devices without an "
        "image. `auto` scans the model definition's imports.",
    )

    @field_validator("pod_spec")
    @classmethod
    def _check_pod_spec(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        for key, why in _FIXED_POD_FIELDS.items():
            if key in value:
                raise PydanticCustomError(
                    "pod_spec_fixed", "pod_spec.{key}: {why}", {"key": key, "why": why}
                )
        spec = value.get("spec")
        containers = spec.get("containers") if isinstance(spec, Mapping) else None
        for i, container in enumerate(containers if isinstance(containers, list) else []):
            if not isinstance(container, Mapping):
                continue
            if container.get("name") != POD_SPEC_FIXED_CONTAINER:
                continue
            for key, why in _FIXED_CONTAINER_FIELDS.items():
                if key in container:
                    raise PydanticCustomError(
                        "pod_spec_fixed",
                        "pod_spec.spec.containers[{index}].{key} is not configurable: {why}",
                        {"index": i, "key": key, "why": why},
                    )
        return value
