"""Allocations run as engine jobs, in the database: the bookkeeping Slurm, PBS and Kubernetes
share (no engine calls here).

Such an allocation is claimed (:func:`~stalwart.master.rm.claim.claim_allocation`) with one
container per node or pod whose ``agent_id`` is the engine's name (``engine``: ``slurm``,
``pbs``, ``kubernetes``; also ``allocations.agent_id``), and gets ``allocations.batch_job_id``
(the Slurm/PBS job id, the Kubernetes Job's name) once the engine took it. Its life:

1. claimed, then submitted outside any transaction; :func:`record_submission` stores the job
   id, or :func:`reject` exits its containers with the engine's message and no code, and
   :func:`end_rejected` ends it with ``retry=False`` (the trial errors at once: retrying cannot
   help). :func:`unsubmitted` lists the claimed ones still to submit (a transient failure, or a
   master that stopped in between).
2. The launcher's ``batch/start`` and ``batch/exit`` calls (:func:`record_node`,
   :func:`rendezvous_spec`) and the engine's news move the rows (:func:`mark_pulling`,
   :func:`mark_running`, :func:`mark_exited`, all through
   :func:`~stalwart.master.transitions.set_container_state`); the cluster loop ends the
   allocation once its containers exited, as on agents.
3. Kills: :func:`stop_unstarted` turns a stop asked of an allocation that does not run yet into a
   kill (nothing to checkpoint); :func:`terminating` lists the jobs to cancel and exits the
   containers of those never submitted.

Everything flushes and leaves the commit to the caller.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.cluster.lifecycle import TrialExit, end_allocation
from stalwart.master.db.tables import LIVE_CONTAINER_STATES, Allocation, Container
from stalwart.master.services.allocations import LOOPBACK
from stalwart.master.transitions import (
    LIVE_ALLOCATION_STATES,
    set_allocation_state,
    set_container_state,
)

__all__ = [
    "end_rejected",
    "live_allocations",
    "mark_exited",
    "mark_pulling",
    "mark_running",
    "node_address",
    "record_node",
    "record_submission",
    "reject",
    "rendezvous_spec",
    "stop_unstarted",
    "terminating",
    "unsubmitted",
]


def live_allocations(session: Session, engine: str) -> list[Allocation]:
    """Every live (claimed, not TERMINATED) allocation ``engine`` runs, by id."""
    return list(
        session.scalars(
            select(Allocation)
            .where(Allocation.agent_id == engine, Allocation.state.in_(LIVE_ALLOCATION_STATES))
            .order_by(Allocation.id)
        )
    )


def unsubmitted(session: Session, engine: str) -> list[str]:
    """Claimed allocations of ``engine`` without a job id and with a container still ASSIGNED:
    claimed by a master that stopped before the engine answered, or whose submission failed
    for a reason that may pass."""
    rows = session.scalars(
        select(Allocation.id)
        .join(Container, Container.allocation_id == Allocation.id)
        .where(
            Allocation.state == "ASSIGNED",
            Allocation.agent_id == engine,
            Allocation.batch_job_id.is_(None),
            Container.state == "ASSIGNED",
        )
        .distinct()
    )
    return sorted(rows)


def record_submission(session: Session, allocation_id: str, job_id: str) -> bool:
    """Store the engine's job id; False when the allocation is gone or already has one."""
    allocation = session.get(Allocation, allocation_id)
    if allocation is None or allocation.batch_job_id is not None:
        return False
    allocation.batch_job_id = job_id
    session.flush()
    return True


def reject(session: Session, allocation_id: str, message: str) -> None:
    """The engine refused the job for good: its containers exit with ``message`` and no code;
    :func:`end_rejected` ends the allocation."""
    mark_exited(session, allocation_id, None, message)


def end_rejected(session: Session, engine: str) -> list[TrialExit]:
    """End ``engine``'s live allocations that never got a job id and whose containers exited
    (refused by the engine, or by the checks of its arguments): their trials error at once
    (``retry=False``). The trial exits, for the searchers."""
    candidates = session.scalars(
        select(Allocation)
        .join(Container, Container.allocation_id == Allocation.id)
        .where(
            Allocation.state.in_(LIVE_ALLOCATION_STATES),
            Allocation.agent_id == engine,
            Allocation.batch_job_id.is_(None),
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


def stop_unstarted(session: Session, engine: str) -> None:
    """Allocations of ``engine`` asked to stop (preemption, pause, cancel) while still queued
    in the engine (ASSIGNED, PULLING): nothing runs to checkpoint, so they are killed
    (TERMINATING)."""
    queued = session.scalars(
        select(Allocation).where(
            Allocation.agent_id == engine,
            Allocation.state.in_(("ASSIGNED", "PULLING")),
            Allocation.preempt_requested.is_(True),
        )
    )
    for allocation in list(queued):
        set_allocation_state(session, allocation, "TERMINATING")


def terminating(session: Session, engine: str, unsubmitted_reason: str) -> list[Allocation]:
    """``engine``'s TERMINATING allocations whose job must be cancelled (they have a job id);
    the containers of those never submitted exit at once with ``unsubmitted_reason``."""
    dying = list(
        session.scalars(
            select(Allocation)
            .where(Allocation.agent_id == engine, Allocation.state == "TERMINATING")
            .order_by(Allocation.id)
        )
    )
    for allocation in dying:
        if allocation.batch_job_id is None:
            mark_exited(session, allocation.id, None, unsubmitted_reason)
    return [a for a in dying if a.batch_job_id is not None]


def _containers(
    session: Session, allocation_id: str, ranks: Sequence[int] | None, states: Sequence[str]
) -> list[Container]:
    query = select(Container).where(
        Container.allocation_id == allocation_id, Container.state.in_(list(states))
    )
    if ranks is not None:
        query = query.where(Container.rank.in_(list(ranks)))
    return list(session.scalars(query.order_by(Container.rank)))


def mark_pulling(session: Session, allocation: Allocation) -> bool:
    """The engine placed the allocation and is pulling its image: ASSIGNED -> PULLING."""
    if allocation.state == "ASSIGNED":
        return set_allocation_state(session, allocation, "PULLING")
    return False


def mark_running(session: Session, allocation: Allocation, rank: int | None = None) -> bool:
    """Container ``rank`` (None: every one) runs, and so does the allocation (a TERMINATING one
    stays so). Flushes; whether anything changed."""
    changed = False
    for row in _containers(session, allocation.id, None if rank is None else [rank], _UNSTARTED):
        changed |= set_container_state(session, row, "RUNNING")
    if allocation.state in ("ASSIGNED", "PULLING", "STARTING"):
        changed |= set_allocation_state(session, allocation, "RUNNING")
    session.flush()
    return changed


_UNSTARTED = ("ASSIGNED", "STARTING")


def mark_exited(
    session: Session,
    allocation_id: str,
    exit_code: int | None,
    reason: str | None,
    ranks: Sequence[int] | None = None,
) -> bool:
    """Containers ``ranks`` (None: every live one) of the allocation exited with ``exit_code``
    and ``reason``; the first word wins (a container already EXITED keeps its code). Flushes;
    whether anything changed."""
    changed = False
    for row in _containers(session, allocation_id, ranks, LIVE_CONTAINER_STATES):
        changed |= set_container_state(session, row, "EXITED", exit_code=exit_code, reason=reason)
    session.flush()
    return changed


_NODE_KEY = "batch_node"
"""Key of a launched container's spec (JSON) that holds ``{"node": ..., "address": ...}`` once
its launcher started; removed from what the launcher receives."""


def record_node(session: Session, allocation_id: str, rank: int, node: str, address: str) -> None:
    """Remember where ``rank`` runs (its ``batch/start``); flushes. Idempotent."""
    row = session.get(Container, (allocation_id, rank))
    if row is None:
        return
    entry = {"node": node, "address": address or LOOPBACK}
    if row.spec.get(_NODE_KEY) != entry:
        row.spec = {**row.spec, _NODE_KEY: entry}
        session.flush()


def node_address(row: Container) -> str | None:
    """The address a launched container reported at ``batch/start``; None before."""
    entry = row.spec.get(_NODE_KEY)
    return str(entry["address"]) if isinstance(entry, dict) and entry.get("address") else None


def rendezvous_spec(
    session: Session, allocation_id: str, rank: int
) -> tuple[dict[str, Any], list[int]]:
    """``(spec, missing ranks)``: ``rank``'s stored spec with the nodes' addresses in its
    ``rendezvous.json`` (rank order) once every rank has reported (:func:`record_node`);
    otherwise ``({}, the ranks not heard from yet)``. One container: its spec as stored."""
    rows = list(
        session.scalars(
            select(Container)
            .where(Container.allocation_id == allocation_id)
            .order_by(Container.rank)
        )
    )
    mine = next((r for r in rows if r.rank == rank), None)
    if mine is None:
        return {}, [rank]
    spec = {k: v for k, v in mine.spec.items() if k != _NODE_KEY}
    if len(rows) == 1:
        return spec, []
    missing = [r.rank for r in rows if node_address(r) is None]
    if missing:
        return {}, missing
    addresses = [str(node_address(r)) for r in rows]
    files = dict(spec.get("info_files") or {})
    rendezvous = json.loads(files.get("rendezvous.json") or "{}")
    rendezvous["container_addrs"] = addresses
    files["rendezvous.json"] = json.dumps(rendezvous)
    spec["info_files"] = files
    return spec, []
