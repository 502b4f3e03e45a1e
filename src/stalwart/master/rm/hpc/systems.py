"""The batch systems the master's batch resource manager drives: Slurm and PBS.

Contract: a :class:`BatchSystem` is everything :class:`~stalwart.master.rm.hpc.manager.
HpcManager` needs from one (the manager's logic is shared): ``submit`` (one request, one
command, its job id), ``cancel`` (one command for many jobs), a tracker (a fixed number of
commands per poll, :class:`~stalwart.hpc.tracker.JobTracker`), ``partitions`` (the pools, one
command; PBS: at most three, see :class:`PbsSystem`) and ``job_ids_by_name`` (one command: to
adopt a job submitted by a master that stopped before recording it). Failures raise
:class:`~stalwart.hpc.errors.HpcCommandError` (and
:class:`~stalwart.hpc.errors.SchedulerArgsError` from ``submit`` for a request that cannot be
built).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from stalwart.hpc.layout import BatchRequest
from stalwart.hpc.pbs.client import PbsClient, PbsTracker
from stalwart.hpc.pbs.queues import queues_to_pools
from stalwart.hpc.pbs.script import PbsOptions
from stalwart.hpc.slurm.client import SlurmClient
from stalwart.hpc.slurm.partitions import PartitionOverride, PartitionPool, partitions_to_pools
from stalwart.hpc.slurm.script import SlurmOptions
from stalwart.hpc.slurm.tracker import SlurmTracker
from stalwart.hpc.tracker import JobTracker
from stalwart.master.rm.hpc.settings import BatchSystemSettings, PbsSettings, SlurmSettings

__all__ = ["BatchSystem", "PbsSystem", "SlurmSystem"]


class BatchSystem(Protocol):
    """One batch system as the manager sees it (see the module docstring)."""

    name: str
    """How messages name it: ``Slurm``, ``PBS``."""
    tracker: JobTracker

    def submit(self, request: BatchRequest) -> str: ...

    def cancel(self, job_ids: Collection[str]) -> None: ...

    def partitions(self) -> list[PartitionPool]: ...

    def job_ids_by_name(self) -> dict[str, str]: ...


def _overrides(settings: BatchSystemSettings) -> dict[str, PartitionOverride]:
    return {
        name: PartitionOverride(slot_type=o.slot_type)
        for name, o in settings.partition_overrides.items()
    }


class SlurmSystem:
    """Slurm: sbatch, scancel, squeue + sacct, sinfo."""

    name = "Slurm"

    def __init__(self, settings: SlurmSettings, client: SlurmClient | None = None) -> None:
        self.settings = settings
        self.client = client or SlurmClient(
            user=settings.user,
            options=SlurmOptions(
                tres_supported=settings.tres_supported, gres_supported=settings.gres_supported
            ),
        )
        self.tracker: JobTracker = SlurmTracker(self.client, min_interval=settings.poll_interval)

    def submit(self, request: BatchRequest) -> str:
        return self.client.submit(request)

    def cancel(self, job_ids: Collection[str]) -> None:
        self.client.cancel(job_ids)

    def partitions(self) -> list[PartitionPool]:
        nodes = self.client.sinfo()
        return partitions_to_pools(nodes, _overrides(self.settings), self.settings.slot_type)

    def job_ids_by_name(self) -> dict[str, str]:
        return {row.name: row.job_id for row in self.client.squeue()}


class PbsSystem:
    """PBS: qsub, qdel, one ``qstat -x -f -F json`` per poll. ``partitions`` are the queues
    (:func:`~stalwart.hpc.pbs.queues.queues_to_pools`: disabled and routing queues left out,
    stopped ones without usable slots) from one ``qstat -Q -f -F json`` and one
    ``pbsnodes -a -F json``; the default one is ``default_partition``, else the server's
    ``default_queue`` (one ``qstat -B -f -F json``, only when ``default_partition`` is unset)."""

    name = "PBS"

    def __init__(self, settings: PbsSettings, client: PbsClient | None = None) -> None:
        self.settings = settings
        self.client = client or PbsClient(options=PbsOptions(gpu_resource=settings.gpu_resource))
        self.tracker: JobTracker = PbsTracker(self.client, min_interval=settings.poll_interval)

    def submit(self, request: BatchRequest) -> str:
        return self.client.submit(request)

    def cancel(self, job_ids: Collection[str]) -> None:
        self.client.cancel(job_ids)

    def partitions(self) -> list[PartitionPool]:
        queues = self.client.queues()
        nodes = self.client.nodes()
        default = self.settings.default_partition or self.client.default_queue()
        return queues_to_pools(
            queues,
            nodes,
            default_queue=default,
            overrides=_overrides(self.settings),
            slot_type=self.settings.slot_type,
        )

    def job_ids_by_name(self) -> dict[str, str]:
        return {job.name: job.job_id for job in self.client.jobs()}
