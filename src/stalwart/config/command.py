"""The config of interactive tasks: commands, notebooks, shells, TensorBoards, generic tasks.

Determined's ``CommandConfig``: what ``det cmd run``, ``det notebook start``, ``det shell
start``, ``det tensorboard start`` and ``det task create`` send as ``config``, merged over the
config template named with ``--template`` and the resource pool's and the master's
``task_container_defaults``, by the same rules as experiments (:mod:`stalwart.config.merge`).
A template written for experiments may be used too: only the settings a task has are taken
from it (:func:`known_settings`), as Determined reads a template leniently for tasks.

:func:`load_command_config` is the one way in: raw mapping + defaults -> a valid, defaulted
:class:`CommandConfig`, or :class:`~stalwart.errors.ConfigError` listing every problem.
Defaults that depend on the kind of task (a TensorBoard takes no slot; the others one) are
filled before validation, so the stored config says what the task got.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from stalwart.config.base import ConfigModel
from stalwart.config.environment import EnvironmentConfig
from stalwart.config.hpc import PbsConfig, SlurmConfig
from stalwart.config.load import DefaultsLayers
from stalwart.config.merge import merge_layers, tcd_to_experiment_layer
from stalwart.config.resources import ResourcesConfig
from stalwart.config.sections import BindMount
from stalwart.config.validation import problems_from_error, render_problems
from stalwart.errors import ConfigError

__all__ = [
    "TASK_KINDS",
    "CommandConfig",
    "NotebookIdleType",
    "TaskKind",
    "idle_timeout_seconds",
    "known_settings",
    "load_command_config",
]

TaskKind = Literal["COMMAND", "NOTEBOOK", "SHELL", "TENSORBOARD", "GENERIC"]
TASK_KINDS: tuple[TaskKind, ...] = ("COMMAND", "NOTEBOOK", "SHELL", "TENSORBOARD", "GENERIC")

NotebookIdleType = Literal["kernels_or_terminals", "kernel_connections", "activity"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def idle_timeout_seconds(value: str | int | None) -> float | None:
    """Seconds of an ``idle_timeout`` (``"30m"``, ``"90s"``, ``"1h"``, or seconds); None: none."""
    if value is None:
        return None
    if isinstance(value, int):
        return float(value)
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a duration: use e.g. 30m, 90s or 1h")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]


class CommandConfig(ConfigModel):
    """An interactive task: what to run, in which environment, on what."""

    description: str | None = Field(
        default=None, description="Shown in listings; the master makes one up when unset."
    )
    entrypoint: str | list[str] | None = Field(
        default=None,
        description="The command of a command or generic task (a string runs under `sh -c`). "
        "Notebooks, shells and TensorBoards run Stalwart's own program.",
    )
    environment: EnvironmentConfig = Field(
        default_factory=EnvironmentConfig,
        description="The task environment: image, environment variables, framework.",
    )
    resources: ResourcesConfig = Field(
        default_factory=ResourcesConfig,
        description="`slots` (1; a TensorBoard 0), `resource_pool`, `priority`, `weight`.",
    )
    bind_mounts: list[BindMount] = Field(
        default_factory=list, description="Host directories mounted into the task."
    )
    work_dir: str | None = Field(
        default=None, description="The working directory (default: where the files land)."
    )
    idle_timeout: str | int | None = Field(
        default=None,
        description="End the task after it has been idle this long (`30m`); unset: never. A "
        "notebook is idle as `notebook_idle_type` says and no one uses it through the proxy.",
    )
    notebook_idle_type: NotebookIdleType = Field(
        default="kernels_or_terminals",
        description="When a notebook counts as idle: no kernels or terminals "
        "(`kernels_or_terminals`), no connection to a kernel (`kernel_connections`), or no "
        "kernel activity (`activity`).",
    )
    tensorboard_args: list[str] = Field(
        default_factory=list, description="Extra command-line arguments of a TensorBoard."
    )
    debug: bool = Field(default=False, description="Verbose logging in the task.")
    slurm: SlurmConfig = Field(default_factory=SlurmConfig, description="Slurm options.")
    pbs: PbsConfig = Field(default_factory=PbsConfig, description="PBS options.")

    @field_validator("idle_timeout")
    @classmethod
    def _duration(cls, value: str | int | None) -> str | int | None:
        idle_timeout_seconds(value)  # raises ValueError with the message users see
        return value

    @property
    def slots(self) -> int:
        """The slots the task takes."""
        return int(self.resources.slots or 0)

    @property
    def idle_seconds(self) -> float | None:
        """``idle_timeout`` in seconds (None: never)."""
        return idle_timeout_seconds(self.idle_timeout)


def _default_slots(kind: TaskKind) -> int:
    return 0 if kind == "TENSORBOARD" else 1


def load_command_config(
    raw: Mapping[str, Any] | None, kind: TaskKind, defaults: DefaultsLayers | None = None
) -> CommandConfig:
    """Merge ``raw`` over ``defaults`` and validate it as the config of a ``kind`` task."""
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError("<config>", ["<config>: must be a mapping of task settings"])
    d = defaults or DefaultsLayers()
    data = merge_layers(dict(raw or {}), known_settings(d.template, CommandConfig))
    resources = dict(data.get("resources") or {})
    if resources.get("slots") is None:
        resources["slots"] = _default_slots(kind)
    data["resources"] = resources
    gpu = isinstance(resources["slots"], int) and resources["slots"] > 0
    merged = merge_layers(
        data,
        _command_layer(tcd_to_experiment_layer(d.pool_tcd, gpu=gpu)),
        _command_layer(tcd_to_experiment_layer(d.master_tcd, gpu=gpu)),
    )
    try:
        return CommandConfig.model_validate(merged)
    except ValidationError as exc:
        problems = problems_from_error(exc, CommandConfig, merged)
        raise ConfigError("<config>", render_problems(problems)) from None


def _command_layer(layer: dict[str, Any]) -> dict[str, Any]:
    """The parts of an experiment layer (from task_container_defaults) a command has."""
    return {key: value for key, value in layer.items() if key in CommandConfig.model_fields}


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation names (directly, or as the one model of a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [m for m in map(_model_of, typing.get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def known_settings(layer: Mapping[str, Any] | None, model: type[BaseModel]) -> dict[str, Any]:
    """``layer`` without the keys ``model`` (and its nested models) does not have.

    A config template is shared by experiments and tasks: a task takes from it what a task
    config has (``environment``, ``resources.slots``, ``bind_mounts``...) and leaves the rest
    (``searcher``, ``hyperparameters``...).
    """
    if not isinstance(layer, Mapping):
        return {}
    names: dict[str, type[BaseModel] | None] = {}
    for name, info in model.model_fields.items():
        sub = _model_of(info.annotation)
        names[name] = sub
        if info.alias:
            names[info.alias] = sub
    out: dict[str, Any] = {}
    for key, value in layer.items():
        if key not in names:
            continue
        sub = names[key]
        out[key] = (
            known_settings(value, sub) if sub is not None and isinstance(value, Mapping) else value
        )
    return out
