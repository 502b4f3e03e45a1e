"""The ``resources`` section: slots, pool, priority and devices of each trial.

Contract: field names, types, bounds and defaults are Determined 0.38's (``resources.json``),
so validating a merged config yields Determined's defaulted ``resources``. Fields Determined keeps
only for old configs (``agent_label``, ``native_parallel``, ``slots``) are accepted and described
as such. Merging with ``task_container_defaults`` (devices, ``shm_size_bytes``) is
:mod:`stalwart.config.merge`'s job, not this module's.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, GetJsonSchemaHandler, field_validator, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError
from pydantic_core import core_schema as cs

from stalwart.config.base import ConfigModel

__all__ = ["SHM_SIZE_PATTERN", "Device", "ResourcesConfig", "ShmSize"]

SHM_SIZE_PATTERN = r"^([0-9]*[.])?[0-9]+ ?(([kmgtpKMGTP]([iI]?[bB])?)|[bB])?$"
"""A memory size as Determined accepts it for ``shm_size``: ``4096``, ``4G``, ``1.5 GiB``..."""

ShmSize = (
    Annotated[int, Field(description="Bytes.")]
    | Annotated[
        str,
        Field(
            pattern=SHM_SIZE_PATTERN,
            description="A size with an optional unit: `4G`, `512M`, `1.5GiB`, `1024b`.",
        ),
    ]
)
"""``shm_size``: bytes as an integer, or a string with a unit (kept as the user wrote it)."""


class Device(ConfigModel):
    """A host device exposed to the task container (like ``docker run --device``).

    Also accepts Docker's string form ``host_path:container_path[:mode]``.
    """

    host_path: str = Field(description="The device on the host, e.g. `/dev/infiniband/uverbs0`.")
    container_path: str = Field(description="Where the device appears inside the container.")
    mode: str = Field(
        default="mrw",
        description="cgroup permissions: any of `r` (read), `w` (write), `m` (mknod).",
    )

    @model_validator(mode="before")
    @classmethod
    def _accept_docker_string(cls, data: Any) -> Any:
        if not isinstance(data, str):
            return data
        parts = data.split(":")
        if len(parts) not in (2, 3):
            raise PydanticCustomError(
                "device_string",
                "invalid device string '{value}': expected host_path:container_path[:mode]",
                {"value": data},
            )
        out = {"host_path": parts[0], "container_path": parts[1]}
        if len(parts) == 3:
            out["mode"] = parts[2]
        return out

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: cs.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler.resolve_ref_schema(handler(core_schema))
        if handler.mode != "validation":
            return schema
        as_string = {
            "type": "string",
            "pattern": r"^[^:]*:[^:]*(:[^:]*)?$",
            "description": "host_path:container_path[:mode]",
        }
        return {"anyOf": [as_string, schema], "title": schema.get("title", "Device")}


class ResourcesConfig(ConfigModel):
    """How many slots a trial uses, where it runs, and its scheduling weight and priority."""

    slots_per_trial: int = Field(
        default=1,
        ge=0,
        description="Slots (GPUs, or CPUs on CPU-only pools) each trial uses; more than one "
        "means distributed training. 0 runs the trial without GPUs (on the auxiliary pool "
        "unless `resource_pool` says otherwise).",
    )
    max_slots: int | None = Field(
        default=None,
        description="Most slots the whole experiment may use at once; unset means no limit.",
    )
    weight: float = Field(
        default=1,
        description="Share of the pool relative to other experiments under the fair-share "
        "scheduler.",
    )
    priority: int | None = Field(
        default=None,
        ge=1,
        le=99,
        description="Priority under the priority scheduler, 1 (highest) to 99; unset uses the "
        "pool's default (42).",
    )
    resource_pool: str = Field(
        default="",
        description="The resource pool to run in; empty uses the cluster's default pool "
        "(compute pool for GPU trials, auxiliary pool for CPU ones).",
    )
    is_single_node: bool = Field(
        default=False,
        description="Refuse to schedule a trial across several nodes: all its slots must be on "
        "one node.",
    )
    shm_size: ShmSize | None = Field(
        default=None,
        description="Size of /dev/shm in the task container: bytes, or a string with a unit "
        "(`4G`). Unset uses the pool's `task_container_defaults.shm_size_bytes` (4 GiB).",
    )
    devices: list[Device] = Field(
        default_factory=list,
        description="Host devices to expose to the task container (`host:container[:mode]` or a "
        "map).",
    )
    slots: int | None = Field(
        default=None,
        description="Slots of a command, notebook or shell; an experiment uses `slots_per_trial`. "
        "Accepted for compatibility, ignored for experiments.",
    )
    native_parallel: bool = Field(
        default=False,
        description="Legacy (Determined's removed native parallelism); accepted and ignored.",
    )
    agent_label: str | None = Field(
        default=None,
        description="Legacy: removed in Determined 0.20 and ignored there; accepted and ignored.",
    )

    @field_validator("shm_size", mode="before")
    @classmethod
    def _one_error_for_shm_size(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(SHM_SIZE_PATTERN, value):
            return value
        raise PydanticCustomError(
            "shm_size",
            "must be a number of bytes or a size with a unit such as 4G, 512M or 1.5GiB",
        )
