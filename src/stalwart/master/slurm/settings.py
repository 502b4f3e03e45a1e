"""The master config's ``resource_manager`` section.

``resource_manager: {type: agent}`` (the default) runs tasks on Stalwart agents;
``resource_manager: {type: slurm, job_storage_root: ..., ...}`` submits each allocation as a
Slurm batch job instead (:mod:`stalwart.master.slurm.manager`). This module only declares the
settings (pydantic, no master imports), so :mod:`stalwart.master.settings` can embed it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentManagerSettings", "PartitionOverride", "ResourceManager", "SlurmSettings"]

SlotType = Literal["cpu", "cuda", "rocm"]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentManagerSettings(_Settings):
    """Tasks run on Stalwart agents (``stalwart agent``)."""

    type: Literal["agent"] = "agent"


class PartitionOverride(_Settings):
    """Per-partition settings (Determined's ``partition_overrides``)."""

    slot_type: SlotType | None = Field(
        default=None, description="Slot type of the partition's slots (cpu, cuda, rocm)."
    )


class SlurmSettings(_Settings):
    """Allocations run as Slurm batch jobs submitted by the master (``sbatch``)."""

    type: Literal["slurm"]
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
        "default partition). Any other pool name is the partition itself.",
    )
    slot_type: SlotType | None = Field(
        default=None,
        description="Slot type of partitions without an override. None: from each "
        "partition's GRES in `sinfo` (GPUs of an AMD-looking type: rocm, other GPUs: cuda, "
        "none: cpu).",
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
    container_run_type: Literal["none"] = Field(
        default="none",
        description="How tasks run on compute nodes: `none` (a Python environment on the "
        "shared filesystem). Apptainer/singularity, enroot and podman are not there yet.",
    )
    python: str = Field(
        default="",
        description="Python on the compute nodes that runs the task launcher "
        "(`python -m stalwart.hpc.task`) and the task itself; it needs Stalwart installed. "
        "Empty: the master's own interpreter.",
    )
    tres_supported: bool = Field(
        default=True, description="Slurm has `select/cons_tres` (`--gpus-per-node`)."
    )
    gres_supported: bool = Field(default=True, description="GPUs can be requested at all.")
    user: str | None = Field(
        default=None,
        description="Only this user's jobs are listed by squeue (None: the master's user's "
        "jobs are the only `stalwart-*` jobs it tracks anyway).",
    )


ResourceManager = Annotated[AgentManagerSettings | SlurmSettings, Field(discriminator="type")]
"""The ``resource_manager`` section: agents (default) or Slurm."""
