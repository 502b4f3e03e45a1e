"""``task_container_defaults``: the master's (or a resource pool's) defaults for every task.

Contract:

- The fields are those of Determined 0.38's master config section of the same name; the
  per-device and legacy forms of ``image``, ``environment_variables``, ``devices`` and
  ``log_policies`` are accepted as in the experiment config (the same models are reused).
- Every field defaults to ``None``, meaning "not set by this layer": the section is a layer
  merged *under* the experiment config, and the first non-null value wins
  (:mod:`stalwart.config.merge`). Determined's own defaults for the master-only fields are the
  ``DEFAULT_*`` constants below; the master settings apply them.
- Determined picks ``gpu_pod_spec`` for tasks with slots and ``cpu_pod_spec`` for the others
  when it fills ``environment.pod_spec``; that choice is the merger's too.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.config.base import ConfigModel
from stalwart.config.environment import EnvironmentImage, EnvironmentVariables, RegistryAuth
from stalwart.config.hpc import PbsConfig, SlurmConfig
from stalwart.config.policies import LogPolicies
from stalwart.config.resources import Device
from stalwart.config.sections import BindMount

__all__ = [
    "DEFAULT_NETWORK_MODE",
    "DEFAULT_PREEMPTION_TIMEOUT",
    "DEFAULT_SHM_SIZE_BYTES",
    "KubernetesTaskContainerDefaults",
    "TaskContainerDefaults",
]

DEFAULT_SHM_SIZE_BYTES = 4 * 1024**3
"""Determined's default ``shm_size_bytes``: 4 GiB."""

DEFAULT_NETWORK_MODE = "bridge"
"""Determined's default container ``network_mode``."""

DEFAULT_PREEMPTION_TIMEOUT = 3600
"""Determined's default ``preemption_timeout``, in seconds."""


class KubernetesTaskContainerDefaults(ConfigModel):
    """Defaults that only the Kubernetes resource manager reads."""

    max_slots_per_pod: int | None = Field(
        default=None,
        ge=0,
        description="Most slots one pod may have; a task needing more is split over several "
        "pods. Unset: the resource manager's own setting.",
    )


class TaskContainerDefaults(ConfigModel):
    """Defaults for the containers (or processes) of every task the master launches.

    A layer under the experiment config: every field unset (``None``) leaves the decision to
    the next layer.
    """

    shm_size_bytes: int | None = Field(
        default=None,
        gt=0,
        description="Size of /dev/shm in task containers, in bytes (Determined's default: "
        "4 GiB). Fills `resources.shm_size`.",
    )
    network_mode: str | None = Field(
        default=None,
        description="Container network mode (`bridge`, `host`, ...; Determined's default: "
        "`bridge`). Meaningful only where tasks run in containers.",
    )
    dtrain_network_interface: str | None = Field(
        default=None,
        description="Network interface for distributed training traffic; unset picks one "
        "automatically.",
    )
    nccl_port_range: str | None = Field(
        default=None, description="Port range NCCL may use, as `low:high`."
    )
    gloo_port_range: str | None = Field(
        default=None, description="Port range Gloo may use, as `low:high`."
    )
    cpu_pod_spec: dict[str, Any] | None = Field(
        default=None,
        description="Default Kubernetes pod spec of tasks without GPU slots (Kubernetes only).",
    )
    gpu_pod_spec: dict[str, Any] | None = Field(
        default=None,
        description="Default Kubernetes pod spec of tasks with GPU slots (Kubernetes only).",
    )
    checkpoint_gc_pod_spec: dict[str, Any] | None = Field(
        default=None,
        description="Kubernetes pod spec of checkpoint garbage-collection tasks (Kubernetes only).",
    )
    image: EnvironmentImage | None = Field(
        default=None,
        description="Default image: one name for every slot type, or a map of "
        "`cpu`/`cuda`/`rocm` (legacy `gpu` = `cuda`).",
    )
    registry_auth: RegistryAuth | None = Field(
        default=None, description="Default credentials for a private image registry."
    )
    force_pull_image: bool | None = Field(
        default=None, description="Pull images even if present (Determined's default: false)."
    )
    environment_variables: EnvironmentVariables | None = Field(
        default=None,
        description="Environment variables added to every task, as a list or a per-device map; "
        "the experiment's win for the same name.",
    )
    add_capabilities: list[str] | None = Field(
        default=None, description="Linux capabilities to add to task containers."
    )
    drop_capabilities: list[str] | None = Field(
        default=None, description="Linux capabilities to drop from task containers."
    )
    devices: list[Device] | None = Field(
        default=None, description="Host devices exposed to every task container."
    )
    bind_mounts: list[BindMount] | None = Field(
        default=None,
        description="Bind mounts added to every task (the experiment's win for the same "
        "container path).",
    )
    work_dir: str | None = Field(
        default=None, description="Working directory of tasks; unset uses the task's own."
    )
    slurm: SlurmConfig | None = Field(
        default=None,
        description="Default Slurm options; their `sbatch_args` come before the experiment's.",
    )
    pbs: PbsConfig | None = Field(
        default=None, description="Default PBS options; accepted for compatibility, ignored."
    )
    startup_hook: str | None = Field(
        default=None,
        description="Bash script sourced in every task before its command (and before the "
        "model definition's startup-hook.sh); what it exports is the command's environment, "
        "and a failing command in it fails the task. A pool's replaces the master's.",
    )
    log_policies: LogPolicies | None = Field(
        default=None,
        description="Log policies for every experiment, merged under the experiment's by name.",
    )
    preemption_timeout: int | None = Field(
        default=None,
        gt=0,
        description="Seconds a preempted task has to exit before it is killed (Determined's "
        "default: 3600).",
    )
    kubernetes: KubernetesTaskContainerDefaults | None = Field(
        default=None, description="Defaults only the Kubernetes resource manager reads."
    )
