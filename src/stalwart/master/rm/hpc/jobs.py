"""Slurm and PBS jobs of allocations, in the database: claim and describe (no batch-system
calls here; the bookkeeping shared with Kubernetes is :mod:`stalwart.master.rm.batchjobs`).

An allocation run by a batch system has one container per node whose ``agent_id`` is the
system's name (``slurm``, ``pbs``: the settings' ``type``). :func:`claim_batch` (PENDING ->
ASSIGNED, commits) lays it out (``nodes = ceil(slots / slots_per_node)``,
:func:`~stalwart.hpc.layout.plan_layout`), picks a port offset no other live batch allocation
uses (jobs may share nodes) and claims it (:func:`~stalwart.master.rm.claim.claim_allocation`).
The nodes' addresses are not known then: each rank's launcher reports its own at
``batch/start``, and every rank gets the full list once all have reported
(:func:`~stalwart.master.rm.batchjobs.rendezvous_spec`). :func:`batch_request` is what is
submitted; :func:`resume_job` rebuilds it for a claimed allocation that was never submitted.

Trials and interactive tasks (commands, notebooks, shells, TensorBoards) are submitted alike.
What differs is read from the task (:func:`job_options`): a trial takes its experiment's
``slurm:``/``pbs:`` section, an interactive task its own config's; an interactive task must fit
on one node (``single_node``: it runs one process, and the master's proxy reaches its service
on rank 0's node); and a task without slots (``resources.slots: 0``, a TensorBoard) asks for no
GPU whatever the partition has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.config import ExperimentConfig
from stalwart.config.command import CommandConfig
from stalwart.config.hpc import PbsConfig, SlurmConfig
from stalwart.hpc.container_runner import container_env
from stalwart.hpc.errors import SchedulerArgsError
from stalwart.hpc.layout import BatchRequest, SlotType, plan_layout
from stalwart.hpc.slurm.partitions import PartitionPool
from stalwart.hpc.task import MASTER_URL_VAR, TOKEN_FILE_NAME, TOKEN_FILE_VAR
from stalwart.master.db.tables import Allocation, Container, Experiment, Task
from stalwart.master.rm.claim import StartupHookOf, claim_allocation
from stalwart.master.rm.hpc.settings import BatchSystemSettings, PbsSettings
from stalwart.master.services.allocations import LOOPBACK
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.log_policies import excluded_agents
from stalwart.master.services.task_spec import ContainerPlan, free_port_offset
from stalwart.master.transitions import LIVE_ALLOCATION_STATES

__all__ = [
    "BatchJob",
    "SystemSection",
    "batch_request",
    "claim_batch",
    "engine_of",
    "job_options",
    "node_slots",
    "partition_of",
    "resume_job",
    "slot_type_of",
    "system_section",
]


SystemSection = SlurmConfig | PbsConfig
"""An experiment's section for the batch system that runs it."""


def engine_of(settings: BatchSystemSettings) -> str:
    """``allocations.agent_id`` and ``containers.agent_id`` of the allocations this batch
    system runs: ``slurm`` or ``pbs``."""
    return "pbs" if isinstance(settings, PbsSettings) else "slurm"


@dataclass(frozen=True)
class BatchJob:
    """A claimed allocation ready to submit: its id, token and batch request."""

    allocation_id: str
    token: str
    request: BatchRequest

    @property
    def token_path(self) -> PurePosixPath:
        """Where the launcher reads the token (mode 0600, in the job directory)."""
        return self.request.job_dir / TOKEN_FILE_NAME


def partition_of(pool: str, settings: BatchSystemSettings) -> str | None:
    """A resource pool's partition: the pool name, or ``default_partition`` for ``default``."""
    if not pool or pool == "default":
        return settings.default_partition
    return pool


def slot_type_of(
    partition: str | None,
    settings: BatchSystemSettings,
    pools: Mapping[str, PartitionPool] | None = None,
) -> SlotType:
    """``partition_overrides[partition].slot_type``, else the master's ``slot_type``, else the
    partition's pool from ``sinfo`` (``pools``, by name; ``partition`` None: the default
    partition's), else ``cpu`` (no sinfo answer yet). Pure."""
    override = settings.partition_overrides.get(partition or "")
    if override is not None and override.slot_type is not None:
        return override.slot_type
    if settings.slot_type is not None:
        return settings.slot_type
    pools = pools or {}
    if partition is None:
        pool = next((p for p in pools.values() if p.default), None)
    else:
        pool = pools.get(partition)
    return pool.slot_type if pool is not None else "cpu"


def system_section(
    config: ExperimentConfig | CommandConfig, settings: BatchSystemSettings
) -> SystemSection:
    """The experiment's (or interactive task's) ``slurm:`` section, or ``pbs:`` under PBS."""
    return config.pbs if isinstance(settings, PbsSettings) else config.slurm


def batch_request(
    allocation: Allocation,
    section: SystemSection,
    settings: BatchSystemSettings,
    *,
    master_url: str,
    python: str,
    pools: Mapping[str, PartitionPool] | None = None,
    single_node: bool = False,
    exclude_nodes: tuple[str, ...] = (),
) -> BatchRequest:
    """The batch request of an allocation (its experiment's or task's ``slurm:`` ``section``
    applied: ``sbatch_args``, ``gpu_type``, ``slots_per_node``; on PBS ``pbs:`` and
    ``pbsbatch_args``); ``pools``: the partitions from ``sinfo`` (:func:`slot_type_of`).
    ``slots_per_node`` unset: the partition's most slots on one node (sinfo), so a trial larger
    than a node spans several; one node when unknown. ``single_node``: an interactive task,
    refused when its slots need more than one node. No slots: a CPU job. ``exclude_nodes``: the
    nodes a trial's ``exclude_node`` log policies keep it off (Slurm's ``--exclude``). Pure."""
    partition = partition_of(allocation.resource_pool, settings)
    if isinstance(section, PbsConfig):
        scheduler_args, gpu_type = tuple(section.pbsbatch_args), None
    else:
        scheduler_args, gpu_type = tuple(section.sbatch_args), section.gpu_type
    spn = section.slots_per_node
    if spn is None:
        pool = _pool_of(partition, pools)
        spn = pool.slots_per_node if pool is not None and pool.slots_per_node > 0 else None
    root = PurePosixPath(str(settings.job_storage_root))
    return BatchRequest(
        allocation_id=allocation.id,
        slots=allocation.slots,
        slot_type=slot_type_of(partition, settings, pools) if allocation.slots > 0 else "cpu",
        command=(python, "-m", "stalwart.hpc.task"),
        job_storage_root=root,
        partition=partition,
        slots_per_node=spn,
        gpu_type=gpu_type or None,
        env=(
            (MASTER_URL_VAR, master_url),
            (TOKEN_FILE_VAR, str(root / allocation.id / TOKEN_FILE_NAME)),
            *container_env(
                settings.container_run_type,
                PurePosixPath(str(settings.image_cache_dir)) if settings.image_cache_dir else None,
                [str(root), *settings.container_binds],
            ),
        ),
        # A preempted job ends (PREEMPTED) and the trial resumes through a new job: a requeued
        # one would wait ~2 min for its BeginTime (docs/contributing/slurm.md, Preemption).
        requeue=False,
        scheduler_args=scheduler_args,
        single_node=single_node,
        exclude_nodes=exclude_nodes,
    )


def _excluded_nodes(session: Session, allocation: Allocation) -> tuple[str, ...]:
    """The nodes a trial's ``exclude_node`` log policies keep its allocation off (sorted)."""
    task = session.get(Task, allocation.task_id)
    if task is None or task.trial_id is None:
        return ()
    return tuple(sorted(excluded_agents(task.extra)))


def _pool_of(
    partition: str | None, pools: Mapping[str, PartitionPool] | None
) -> PartitionPool | None:
    pools = pools or {}
    if partition is None:
        return next((p for p in pools.values() if p.default), None)
    return pools.get(partition)


def node_slots(request: BatchRequest) -> list[int]:
    """Slots of each node (rank) of ``request``: ``ceil(slots / nodes)`` each, the last node
    the rest; one node when the request cannot be laid out (its submission says why). Pure."""
    try:
        layout = plan_layout(request)
    except SchedulerArgsError:
        return [request.slots]
    per_node, left = layout.slots_per_node, request.slots
    out = []
    for _ in range(layout.nodes):
        out.append(min(per_node, left))
        left -= out[-1]
    return out


def job_options(
    session: Session, allocation: Allocation, settings: BatchSystemSettings
) -> tuple[SystemSection, bool]:
    """``(batch-system section, single_node)`` of the allocation's task: a trial's experiment
    section, several nodes allowed; an interactive task's own section, one node; an empty
    section when the task is gone."""
    task = session.get(Task, allocation.task_id)
    if task is not None and task.trial_id is None and task.config is not None:
        return system_section(CommandConfig.model_validate(task.config), settings), True
    experiment = session.scalar(
        select(Experiment)
        .join(Task, Task.experiment_id == Experiment.id)
        .where(Task.task_id == allocation.task_id)
    )
    if experiment is None:
        empty = PbsConfig() if isinstance(settings, PbsSettings) else SlurmConfig()
        return empty, False
    return system_section(typed_config(experiment), settings), False


def claim_batch(
    session: Session,
    allocation_id: str,
    settings: BatchSystemSettings,
    *,
    master_url: str,
    python: str,
    cluster_id: str,
    pools: Mapping[str, PartitionPool] | None = None,
    first_port_offset: int = 0,
    startup_hook_of: StartupHookOf | None = None,
) -> BatchJob | None:
    """PENDING -> ASSIGNED with a token, ports and one container (see the module docstring);
    commits. None when the allocation is not PENDING."""
    allocation = session.get(Allocation, allocation_id)
    if allocation is None or allocation.state != "PENDING":
        return None
    section, single_node = job_options(session, allocation, settings)
    request = batch_request(
        allocation,
        section,
        settings,
        master_url=master_url,
        python=python,
        pools=pools,
        single_node=single_node,
        exclude_nodes=_excluded_nodes(session, allocation),
    )
    engine = engine_of(settings)
    # Slot ids per node: device indices there (the launcher swaps in the GPUs Slurm made
    # visible); CPU slots get ids too, so a launcher knows how many workers its node runs.
    plans = [
        ContainerPlan(
            rank=rank,
            agent_id=engine,
            address=LOOPBACK,  # the node's own address arrives with its batch/start
            slot_ids=tuple(str(i) for i in range(count)),
            device_indices=tuple(range(count)),
        )
        for rank, count in enumerate(node_slots(request))
    ]
    token = claim_allocation(
        session,
        allocation,
        plans,
        port_offset=free_port_offset(_batch_port_offsets(session, engine), first_port_offset),
        device_type=request.slot_type,
        cluster_id=cluster_id,
        startup_hook_of=startup_hook_of,
    )
    return BatchJob(allocation.id, token, request) if token is not None else None


def _batch_port_offsets(session: Session, engine: str) -> list[int]:
    """Port offsets of the live batch allocations (any of them may share a node)."""
    rows = session.scalars(
        select(Allocation.ports).where(
            Allocation.agent_id == engine, Allocation.state.in_(LIVE_ALLOCATION_STATES)
        )
    )
    return [int(p["offset"]) for p in rows if isinstance(p, dict) and "offset" in p]


def resume_job(
    session: Session,
    allocation_id: str,
    settings: BatchSystemSettings,
    *,
    master_url: str,
    python: str,
    pools: Mapping[str, PartitionPool] | None = None,
) -> BatchJob | None:
    """The :class:`BatchJob` of an unsubmitted allocation (its token from the stored spec)."""
    allocation = session.get(Allocation, allocation_id)
    row = session.get(Container, (allocation_id, 0))
    if allocation is None or row is None or allocation.batch_job_id is not None:
        return None
    token = str(row.spec.get("token") or "")
    section, single_node = job_options(session, allocation, settings)
    request = batch_request(
        allocation,
        section,
        settings,
        master_url=master_url,
        python=python,
        pools=pools,
        single_node=single_node,
        exclude_nodes=_excluded_nodes(session, allocation),
    )
    return BatchJob(allocation_id, token, request)
