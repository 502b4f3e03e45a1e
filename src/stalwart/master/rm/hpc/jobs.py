"""Allocations as batch jobs, in the database: claim, describe, record (no Slurm calls here).

An allocation run by a batch system has one :class:`~stalwart.master.db.tables.Container` per
node with ``agent_id`` :data:`BATCH_AGENT` (its :class:`~stalwart.agent.protocol.TaskSpec`
stored as on agents, token included), and ``allocations.batch_job_id`` once submitted. Its life:

1. :func:`claim_batch` (PENDING -> ASSIGNED, one transaction, commits): token, ports (an offset
   no other live batch allocation uses, since jobs may share nodes), one container row per node
   (``nodes = ceil(slots / slots_per_node)``, :func:`~stalwart.hpc.layout.plan_layout`) with
   its spec (the same builder as agent placement:
   :func:`~stalwart.master.services.task_spec.allocation_task_specs`). The nodes' addresses are
   not known yet: each rank's launcher reports its own at ``batch/start``
   (:func:`record_node`), and :func:`rendezvous_spec` gives every rank the full list once all
   have reported (the ``rendezvous.json`` of the task contract).
2. The caller submits :func:`batch_request` outside any transaction, then
   :func:`record_submission` (the job id) or :func:`record_rejection` (the container EXITED with
   the batch system's message and no job id: :func:`end_rejected` ends such allocations with
   ``retry=False``, so the trial errors at once).
3. The launcher's ``batch/start`` and ``batch/exit`` calls and the tracker's updates move the
   container rows (:func:`mark_running`, :func:`mark_exited`); the cluster loop ends the
   allocation once its containers exited, as on agents.

Only trials run on batch systems for now (commands, notebooks, shells are left for later).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.hpc.container_runner import container_env
from stalwart.hpc.errors import SchedulerArgsError
from stalwart.hpc.layout import BatchRequest, SlotType, plan_layout
from stalwart.hpc.slurm.partitions import PartitionPool
from stalwart.hpc.task import MASTER_URL_VAR, TOKEN_FILE_NAME, TOKEN_FILE_VAR
from stalwart.master.cluster.lifecycle import TrialExit, end_allocation
from stalwart.master.db.tables import (
    LIVE_CONTAINER_STATES,
    Allocation,
    Container,
    Experiment,
    Task,
    utcnow,
)
from stalwart.master.rm.hpc.settings import BatchSystemSettings
from stalwart.master.rm.kubernetes.settings import K8S_AGENT
from stalwart.master.services.allocations import LOOPBACK
from stalwart.master.services.auth import token_sha256
from stalwart.master.services.task_spec import (
    ContainerPlan,
    allocation_task_specs,
    assign_containers,
    free_port_offset,
    ports_for,
)
from stalwart.master.transitions import LIVE_ALLOCATION_STATES, set_allocation_state

__all__ = [
    "BATCH_AGENT",
    "BatchJob",
    "batch_request",
    "claim_batch",
    "end_rejected",
    "mark_exited",
    "mark_running",
    "node_slots",
    "partition_of",
    "record_node",
    "record_rejection",
    "record_submission",
    "rendezvous_spec",
    "resume_job",
    "slot_type_of",
    "system_section",
    "unsubmitted",
]

BATCH_AGENT = "slurm"
"""``containers.agent_id`` of the containers a batch system runs."""


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


_ARGS_KEY = {"slurm": "sbatch_args", "pbs": "pbsbatch_args"}
"""The experiment config section of each batch system, and its key of extra scheduler args."""


def system_section(
    config: Mapping[str, Any], settings: BatchSystemSettings
) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """The experiment's ``slurm:`` (``pbs:``) section and its ``sbatch_args``
    (``pbsbatch_args``), by the batch system ``settings`` configure."""
    name = str(getattr(settings, "type", "slurm"))
    section = config.get(name)
    section = section if isinstance(section, Mapping) else {}
    args = section.get(_ARGS_KEY.get(name, "sbatch_args")) or ()
    return section, tuple(str(a) for a in args)


def batch_request(
    allocation: Allocation,
    config: Mapping[str, Any],
    settings: BatchSystemSettings,
    *,
    master_url: str,
    python: str,
    pools: Mapping[str, PartitionPool] | None = None,
) -> BatchRequest:
    """The batch request of an allocation (its experiment's ``slurm:`` section applied:
    ``sbatch_args``, ``gpu_type``, ``slots_per_node``; on PBS ``pbs:`` and ``pbsbatch_args``);
    ``pools``: the partitions from ``sinfo`` (:func:`slot_type_of`). ``slots_per_node``
    unset: the partition's most slots on one node (sinfo), so a trial larger than a node spans
    several; one node when unknown. Pure."""
    partition = partition_of(allocation.resource_pool, settings)
    slurm, scheduler_args = system_section(config, settings)
    spn = slurm.get("slots_per_node")
    if not isinstance(spn, int):
        pool = _pool_of(partition, pools)
        spn = pool.slots_per_node if pool is not None and pool.slots_per_node > 0 else None
    gpu_type = slurm.get("gpu_type")
    root = PurePosixPath(str(settings.job_storage_root))
    return BatchRequest(
        allocation_id=allocation.id,
        slots=allocation.slots,
        slot_type=slot_type_of(partition, settings, pools),
        command=(python, "-m", "stalwart.hpc.task"),
        job_storage_root=root,
        partition=partition,
        slots_per_node=spn if isinstance(spn, int) else None,
        gpu_type=gpu_type if isinstance(gpu_type, str) and gpu_type else None,
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
    )


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


def _config(session: Session, allocation: Allocation) -> dict[str, Any]:
    config = session.scalar(
        select(Experiment.config)
        .join(Task, Task.experiment_id == Experiment.id)
        .where(Task.task_id == allocation.task_id)
    )
    return dict(config or {})


def claim_batch(
    session: Session,
    allocation_id: str,
    settings: BatchSystemSettings,
    *,
    master_url: str,
    python: str,
    cluster_id: str,
    pools: Mapping[str, PartitionPool] | None = None,
) -> BatchJob | None:
    """PENDING -> ASSIGNED with a token, ports and one container (see the module docstring);
    commits. None when the allocation is not PENDING or not a trial's."""
    allocation = session.get(Allocation, allocation_id)
    if allocation is None or allocation.state != "PENDING":
        return None
    request = batch_request(
        allocation,
        _config(session, allocation),
        settings,
        master_url=master_url,
        python=python,
        pools=pools,
    )
    token = secrets.token_urlsafe(32)
    offset = free_port_offset(_batch_port_offsets(session))
    ports = ports_for(offset)
    allocation.ports = {"offset": offset, **ports}
    allocation.token_sha256 = token_sha256(token)
    allocation.agent_id = BATCH_AGENT
    # Slot ids per node: device indices there (the launcher swaps in the GPUs Slurm made
    # visible); CPU slots get ids too, so a launcher knows how many workers its node runs.
    plans = [
        ContainerPlan(
            rank=rank,
            agent_id=BATCH_AGENT,
            address=LOOPBACK,  # the node's own address arrives with its batch/start
            slot_ids=tuple(str(i) for i in range(count)),
            device_indices=tuple(range(count)),
        )
        for rank, count in enumerate(node_slots(request))
    ]
    specs = allocation_task_specs(
        session,
        allocation,
        plans,
        token=token,
        ports=ports,
        device_type=request.slot_type,
        cluster_id=cluster_id,
    )
    if specs is None:
        session.rollback()
        return None
    assign_containers(session, allocation, specs, BATCH_AGENT)
    return BatchJob(allocation.id, token, request)


def _batch_port_offsets(session: Session) -> list[int]:
    """Port offsets of the live batch allocations (any of them may share a node)."""
    rows = session.scalars(
        select(Allocation.ports).where(
            Allocation.agent_id == BATCH_AGENT, Allocation.state.in_(LIVE_ALLOCATION_STATES)
        )
    )
    return [int(p["offset"]) for p in rows if isinstance(p, dict) and "offset" in p]


_NODE_KEY = "batch_node"
"""Key of a batch container's spec (JSON) that holds ``{"node": ..., "address": ...}`` once its
launcher started; removed from what the launcher receives."""


def record_node(session: Session, allocation_id: str, rank: int, node: str, address: str) -> None:
    """Remember where ``rank`` runs (its ``batch/start``); flushes. Idempotent."""
    row = session.get(Container, (allocation_id, rank))
    if row is None:
        return
    entry = {"node": node, "address": address or LOOPBACK}
    if row.spec.get(_NODE_KEY) != entry:
        row.spec = {**row.spec, _NODE_KEY: entry}
        session.flush()


def rendezvous_spec(
    session: Session, allocation_id: str, rank: int
) -> tuple[dict[str, Any], list[int]]:
    """``(spec, missing ranks)``: ``rank``'s stored spec with the nodes' addresses in its
    ``rendezvous.json`` (rank order) once every rank has reported (:func:`record_node`);
    otherwise ``({}, the ranks not heard from yet)``. One container: its spec as stored."""
    rows = list(
        session.scalars(
            select(Container)
            .where(
                Container.allocation_id == allocation_id,
                Container.agent_id.in_((BATCH_AGENT, K8S_AGENT)),
            )
            .order_by(Container.rank)
        )
    )
    mine = next((r for r in rows if r.rank == rank), None)
    if mine is None:
        return {}, [rank]
    spec = {k: v for k, v in mine.spec.items() if k != _NODE_KEY}
    if len(rows) == 1:
        return spec, []
    missing = [r.rank for r in rows if not isinstance(r.spec.get(_NODE_KEY), dict)]
    if missing:
        return {}, missing
    addresses = [str(r.spec[_NODE_KEY]["address"]) for r in rows]
    files = dict(spec.get("info_files") or {})
    rendezvous = json.loads(files.get("rendezvous.json") or "{}")
    rendezvous["container_addrs"] = addresses
    files["rendezvous.json"] = json.dumps(rendezvous)
    spec["info_files"] = files
    return spec, []


def unsubmitted(session: Session) -> list[str]:
    """ASSIGNED batch allocations without a job id and with a live container: claimed by a
    master that stopped before ``sbatch`` answered, or whose submission failed transiently."""
    rows = session.scalars(
        select(Allocation.id)
        .join(Container, Container.allocation_id == Allocation.id)
        .where(
            Allocation.state == "ASSIGNED",
            Allocation.batch_job_id.is_(None),
            Container.agent_id == BATCH_AGENT,
            Container.state == "ASSIGNED",
        )
        .distinct()
    )
    return sorted(rows)


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
    request = batch_request(
        allocation,
        _config(session, allocation),
        settings,
        master_url=master_url,
        python=python,
        pools=pools,
    )
    return BatchJob(allocation_id, token, request)


def record_submission(session: Session, allocation_id: str, job_id: str) -> bool:
    """Store the job id (commits); False when the allocation is gone or already has one."""
    allocation = session.get(Allocation, allocation_id)
    if allocation is None or allocation.batch_job_id is not None:
        return False
    allocation.batch_job_id = job_id
    session.commit()
    return True


def record_rejection(session: Session, allocation_id: str, message: str) -> None:
    """The job could not be submitted for good: its containers exit with ``message``
    (commits); :func:`end_rejected` ends the allocation."""
    rows = session.scalars(
        select(Container).where(
            Container.allocation_id == allocation_id, Container.state.in_(LIVE_CONTAINER_STATES)
        )
    )
    for row in rows:
        row.state = "EXITED"
        row.exit_code = None
        row.exit_reason = message
        row.exited_at = utcnow()
    session.commit()


def end_rejected(session: Session) -> list[TrialExit]:
    """End the live batch allocations that were never submitted and whose containers exited
    (rejected by the batch system or by the checks of its arguments): their trials error at
    once (``retry=False``). Flushes; the caller commits."""
    candidates = session.scalars(
        select(Allocation)
        .join(Container, Container.allocation_id == Allocation.id)
        .where(
            Allocation.state.in_(LIVE_ALLOCATION_STATES),
            Allocation.batch_job_id.is_(None),
            Container.agent_id == BATCH_AGENT,
            Container.state == "EXITED",
        )
        .distinct()
    )
    exits = []
    for allocation in list(candidates):
        row = session.get(Container, (allocation.id, 0))
        reason = row.exit_reason if row is not None else None
        exit_ = end_allocation(session, allocation, None, reason, retry=False)
        if exit_ is not None:
            exits.append(exit_)
    return exits


def mark_running(session: Session, allocation: Allocation, rank: int | None = None) -> bool:
    """A batch container (``rank``, or every one) runs: container and allocation RUNNING.
    Flushes; returns whether anything changed."""
    query = select(Container).where(
        Container.allocation_id == allocation.id, Container.agent_id == BATCH_AGENT
    )
    if rank is not None:
        query = query.where(Container.rank == rank)
    rows = list(session.scalars(query))
    changed = False
    for row in rows:
        if row.state in ("ASSIGNED", "STARTING"):
            row.state = "RUNNING"
            changed = True
    if allocation.state in ("ASSIGNED", "PULLING", "STARTING"):
        set_allocation_state(session, allocation, "RUNNING")
        changed = True
    session.flush()
    return changed


def mark_exited(
    session: Session,
    allocation_id: str,
    exit_code: int | None,
    reason: str | None,
    ranks: Sequence[int] | None = None,
) -> bool:
    """Batch containers (``ranks``, or every live one) exited; the first word wins (a container
    already EXITED keeps its code). Flushes; returns whether anything changed."""
    query = select(Container).where(
        Container.allocation_id == allocation_id,
        Container.agent_id == BATCH_AGENT,
        Container.state.in_(LIVE_CONTAINER_STATES),
    )
    if ranks is not None:
        query = query.where(Container.rank.in_(list(ranks)))
    changed = False
    for row in session.scalars(query):
        row.state = "EXITED"
        row.exit_code = exit_code
        row.exit_reason = reason
        row.exited_at = utcnow()
        changed = True
    session.flush()
    return changed
