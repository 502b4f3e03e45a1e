"""Allocations as batch jobs, in the database: claim, describe, record (no Slurm calls here).

An allocation run by a batch system has one :class:`~stalwart.master.db.tables.Container` per
node with ``agent_id`` :data:`BATCH_AGENT` (its :class:`~stalwart.agent.protocol.TaskSpec`
stored as on agents, token included), and ``allocations.batch_job_id`` once submitted. Its life:

1. :func:`claim_batch` (PENDING -> ASSIGNED, one transaction, commits): token, ports, container
   rows with their specs (the same builder as agent placement:
   :func:`~stalwart.master.services.task_spec.allocation_task_specs`).
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

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.hpc.layout import BatchRequest, SlotType
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
from stalwart.master.services.allocations import LOOPBACK
from stalwart.master.services.auth import token_sha256
from stalwart.master.services.task_spec import ContainerPlan, allocation_task_specs, ports_for
from stalwart.master.slurm.settings import SlurmSettings
from stalwart.master.transitions import LIVE_ALLOCATION_STATES, set_allocation_state

__all__ = [
    "BATCH_AGENT",
    "BatchJob",
    "batch_request",
    "claim_batch",
    "end_rejected",
    "mark_exited",
    "mark_running",
    "partition_of",
    "record_rejection",
    "record_submission",
    "resume_job",
    "slot_type_of",
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


def partition_of(pool: str, settings: SlurmSettings) -> str | None:
    """A resource pool's partition: the pool name, or ``default_partition`` for ``default``."""
    if not pool or pool == "default":
        return settings.default_partition
    return pool


def slot_type_of(
    partition: str | None,
    settings: SlurmSettings,
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


def _slurm_section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    section = config.get("slurm")
    return section if isinstance(section, Mapping) else {}


def batch_request(
    allocation: Allocation,
    config: Mapping[str, Any],
    settings: SlurmSettings,
    *,
    master_url: str,
    python: str,
    pools: Mapping[str, PartitionPool] | None = None,
) -> BatchRequest:
    """The batch request of an allocation (its experiment's ``slurm:`` section applied:
    ``sbatch_args``, ``gpu_type``, ``slots_per_node``); ``pools``: the partitions from
    ``sinfo`` (:func:`slot_type_of`). Pure."""
    partition = partition_of(allocation.resource_pool, settings)
    slurm = _slurm_section(config)
    spn = slurm.get("slots_per_node")
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
        ),
        # A preempted job ends (PREEMPTED) and the trial resumes through a new job: a requeued
        # one would wait ~2 min for its BeginTime (docs/contributing/slurm.md, Preemption).
        requeue=False,
        scheduler_args=tuple(str(a) for a in slurm.get("sbatch_args") or ()),
        single_node=True,  # multi-node launch (rendezvous across nodes) is not wired yet
    )


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
    settings: SlurmSettings,
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
    ports = ports_for(0)  # one allocation per node on a batch system is the usual case
    allocation.ports = {"offset": 0, **ports}
    allocation.token_sha256 = token_sha256(token)
    allocation.agent_id = BATCH_AGENT
    gpu = request.slot_type != "cpu"
    plan = ContainerPlan(
        rank=0,
        agent_id=BATCH_AGENT,
        address=LOOPBACK,
        slot_ids=tuple(str(i) for i in range(allocation.slots)) if gpu else (),
        device_indices=tuple(range(allocation.slots)) if gpu else (),
    )
    specs = allocation_task_specs(
        session,
        allocation,
        [plan],
        token=token,
        ports=ports,
        device_type=request.slot_type,
        cluster_id=cluster_id,
    )
    if specs is None:
        session.rollback()
        return None
    for spec in specs:
        session.add(
            Container(
                allocation_id=allocation.id,
                rank=spec.rank,
                agent_id=BATCH_AGENT,
                slot_ids=list(spec.slot_ids),
                state="ASSIGNED",
                spec=spec.model_dump(mode="json"),
            )
        )
    set_allocation_state(session, allocation, "ASSIGNED")
    session.commit()
    return BatchJob(allocation.id, token, request)


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
    settings: SlurmSettings,
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
