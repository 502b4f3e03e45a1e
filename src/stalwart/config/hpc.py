"""The ``slurm`` and ``pbs`` sections: options for HPC workload managers.

Contract: the fields and defaults are Determined 0.38's (``hpc-cluster-slurm.json`` and
``hpc-cluster-pbs.json``). They appear both at the top level of an experiment config and in
``task_container_defaults``. Stalwart's Slurm resource manager honours ``slurm``; it has no PBS
manager, so ``pbs`` is accepted (old configs keep validating) and ignored. How the arguments of
several layers combine is :mod:`stalwart.config.merge`'s job.
"""

from __future__ import annotations

from pydantic import Field

from stalwart.config.base import ConfigModel

__all__ = ["PbsConfig", "SlurmConfig"]


class SlurmConfig(ConfigModel):
    """Options for tasks launched on Slurm."""

    slots_per_node: int | None = Field(
        default=None,
        ge=1,
        description="GPUs (or CPUs, for CPU-only tasks) to use on each node; unset lets Slurm "
        "spread the slots as it sees fit.",
    )
    gpu_type: str | None = Field(
        default=None,
        description="The GPU type to request (`--gpus=<type>:<n>`), e.g. `a100`; unset requests "
        "any GPU.",
    )
    sbatch_args: list[str] = Field(
        default_factory=list,
        description="Extra `sbatch` options, one per item (e.g. `--time=2:00:00`).",
    )


class PbsConfig(ConfigModel):
    """Options for tasks launched on PBS (accepted; Stalwart has no PBS manager)."""

    slots_per_node: int | None = Field(
        default=None,
        ge=1,
        description="GPUs (or CPUs) per node. Accepted for compatibility; Stalwart does not "
        "launch on PBS.",
    )
    pbsbatch_args: list[str] = Field(
        default_factory=list,
        description="Extra `qsub` options, one per item. Accepted for compatibility; Stalwart "
        "does not launch on PBS.",
    )
