"""The ``resource_manager`` section of a batch cluster: Slurm and PBS.

``resource_manager: {type: slurm, job_storage_root: ..., ...}`` submits each allocation as a
Slurm batch job, and ``{type: pbs, ...}`` (the same shape) as a PBS job
(:mod:`stalwart.master.rm.hpc.manager`). This module only declares the settings (pydantic, no
master imports); :mod:`stalwart.master.rm.settings` lists them among the resource managers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BatchSystemSettings",
    "PartitionOverride",
    "PbsSettings",
    "SlurmSettings",
]

SlotType = Literal["cpu", "cuda", "rocm"]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PartitionOverride(_Settings):
    """Per-partition settings (Determined's ``partition_overrides``)."""

    slot_type: SlotType | None = Field(
        default=None, description="Slot type of the partition's slots (cpu, cuda, rocm)."
    )


class BatchSystemSettings(_Settings):
    """What Slurm and PBS share: allocations run as batch jobs the master submits. A pool is
    a Slurm partition (a PBS queue)."""

    job_storage_root: Path = Field(
        description="A directory shared by the master and every compute node: each allocation "
        "gets `<job_storage_root>/<allocation id>/` (batch script, Slurm output, its token file "
        "(mode 0600), the task's working directories)."
    )
    master_url: str = Field(
        default="",
        description="The master's URL as compute nodes reach it (`http://head-node:8080`). "
        "Empty: `http://<host>:<port>` of the master's own settings.",
    )
    default_partition: str | None = Field(
        default=None,
        description="Partition of allocations in the resource pool `default` (None: Slurm's "
        "default partition; PBS: the server's `default_queue`). Any other pool name is the "
        "partition (queue) itself.",
    )
    slot_type: SlotType | None = Field(
        default=None,
        description="Slot type of partitions without an override. None: from each "
        "partition's GRES in `sinfo` (GPUs of an AMD-looking type: rocm, other GPUs: cuda, "
        "none: cpu); on PBS from each queue's nodes in `pbsnodes` (`gpu_resource` > 0: cuda, "
        "else cpu).",
    )
    partition_overrides: dict[str, PartitionOverride] = Field(
        default_factory=dict, description="Per-partition settings, by partition name."
    )
    poll_interval: float = Field(
        default=2.0,
        gt=0,
        description="Seconds between two polls of Slurm (one squeue, at most one sacct, for "
        "every job together).",
    )
    stuck_job_timeout: float = Field(
        default=600.0,
        ge=0,
        description="Seconds a queued job may wait for a reason Slurm says it will never start "
        "by itself (PartitionConfig, PartitionNodeLimit, BadConstraints, ReqNodeNotAvail, a "
        "held job...) before Stalwart cancels it and its trial errors with that reason in its "
        "logs. 0: never cancel (the reason is still logged).",
    )
    container_run_type: Literal["none", "apptainer", "singularity", "podman", "enroot"] = Field(
        default="none",
        description="How tasks run on compute nodes: `none` (a Python environment on the "
        "shared filesystem), or inside the experiment's image with apptainer, singularity, "
        "podman or enroot (the tool must be installed on the compute nodes; the task launcher "
        "itself runs outside, with `python`).",
    )
    image_cache_dir: Path | None = Field(
        default=None,
        description="A shared directory of images converted for apptainer/singularity (SIF) "
        "or enroot (squashfs), filled by `stalwart envs precache`; needed by those run types. "
        "Tasks whose image is not cached there pull it at start (slow).",
    )
    container_binds: list[str] = Field(
        default_factory=list,
        description="Host directories bound into task containers at the same path (the "
        "job_storage_root always is), e.g. the checkpoint storage or datasets.",
    )
    python: str = Field(
        default="",
        description="Python on the compute nodes that runs the task launcher "
        "(`python -m stalwart.hpc.task`) and the task itself; it needs Stalwart installed. "
        "Empty: the master's own interpreter.",
    )


class SlurmSettings(BatchSystemSettings):
    """Allocations run as Slurm batch jobs submitted by the master (``sbatch``)."""

    type: Literal["slurm"]
    tres_supported: bool = Field(
        default=True, description="Slurm has `select/cons_tres` (`--gpus-per-node`)."
    )
    gres_supported: bool = Field(default=True, description="GPUs can be requested at all.")
    user: str | None = Field(
        default=None,
        description="Only this user's jobs are listed by squeue (None: the master's user's "
        "jobs are the only `stalwart-*` jobs it tracks anyway).",
    )


class PbsSettings(BatchSystemSettings):
    """Allocations run as PBS (OpenPBS / PBS Pro) jobs submitted by the master (``qsub``);
    ``default_partition`` and ``partition_overrides`` name queues. The server needs job
    history (``qmgr -c 'set server job_history_enable=True'``): finished jobs' exit statuses
    come from ``qstat -x``."""

    type: Literal["pbs"]
    gpu_resource: str = Field(
        default="ngpus", description="The PBS resource that counts GPUs in a select chunk."
    )
