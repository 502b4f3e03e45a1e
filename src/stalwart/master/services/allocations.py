"""Allocations as a task sees them: access rules, preemption signals, rendezvous, all-gather.

Contracts:

- :func:`authorize_allocation` / :func:`authorize_task` are the one access rule for task-facing
  endpoints: an allocation token may only touch its own allocation (and its own task); a user
  may touch an allocation of a task they own, and an admin any. Anything else is 403.
- Preemption is a flag on the allocation row (the long-poll also says "preempt" to an
  allocation that is TERMINATING or TERMINATED: it is being killed). :func:`request_preemption`
  sets it (idempotent) and flushes; the caller commits and then wakes long-polls with
  ``notifier.notify(allocation_key(id))``. :func:`signal_preemption` does all three for callers
  outside a request (the scheduler, an experiment pause, tests).
- Container (resources) ids are derived, not stored: :func:`container_id` is a stable UUID of
  ``(allocation id, rank)``. Whoever launches an allocation's containers sets
  ``DET_RESOURCES_ID`` / ``DET_CONTAINER_ID`` to it; the slot views and rendezvous use it.
- :func:`rendezvous_info` answers for one container of an allocation. Today every allocation is
  one container (rank 0, on its agent's first address); :func:`allocation_containers` is the
  single place a multi-container allocation will list its containers.
- :class:`AllGather` is an in-memory, per-allocation all-gather (Slurm and Kubernetes
  rendezvous in ``prep_container``); it lives in the event loop and never touches the database.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from stalwart.errors import (
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
)
from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Agent, Allocation, Experiment, Task, User
from stalwart.master.state import Notifier, allocation_key

__all__ = [
    "LOOPBACK",
    "AllGather",
    "ContainerPlacement",
    "RendezvousInfo",
    "ack_preemption",
    "allocation_containers",
    "authorize_allocation",
    "authorize_task",
    "container_id",
    "context_directory",
    "get_allocation",
    "preemption_requested",
    "rendezvous_info",
    "request_preemption",
    "set_accelerator_data",
    "should_preempt",
    "signal_preemption",
]

LOOPBACK = "127.0.0.1"
_CONTAINER_NAMESPACE = uuid.UUID("6f1c2b8e-2f5d-4a53-9b0e-5b1d0c7a4e21")


def get_allocation(session: Session, allocation_id: str) -> Allocation:
    """The allocation, or NotFoundError (404)."""
    allocation = session.get(Allocation, allocation_id)
    if allocation is None:
        raise NotFoundError(f"allocation {allocation_id} not found")
    return allocation


def _task_owner(session: Session, task_id: str) -> int | None:
    task = session.get(Task, task_id)
    return task.owner_id if task is not None else None


def authorize_allocation(
    session: Session, allocation_id: str, *, user: User, caller_allocation_id: str | None
) -> Allocation:
    """The allocation, if the caller may act on it (see the module contract).

    404 when it does not exist (for users), 403 when the caller is another allocation's task
    or a user who neither owns the task nor is an admin.
    """
    if caller_allocation_id is not None and caller_allocation_id != allocation_id:
        raise ForbiddenError(
            f"an allocation token of {caller_allocation_id} cannot act on allocation "
            f"{allocation_id}"
        )
    allocation = get_allocation(session, allocation_id)
    if (
        caller_allocation_id is None
        and not user.admin
        and _task_owner(session, allocation.task_id) != user.id
    ):
        raise ForbiddenError(f"user {user.username} cannot act on allocation {allocation_id}")
    return allocation


def authorize_task(
    session: Session, task_id: str, *, user: User, caller_allocation_id: str | None
) -> Task:
    """The task, if the caller may act on it as its runner (see the module contract)."""
    if caller_allocation_id is not None:
        own = session.get(Allocation, caller_allocation_id)
        if own is None or own.task_id != task_id:
            raise ForbiddenError(
                f"an allocation token of {caller_allocation_id} cannot act on task {task_id}"
            )
    task = session.get(Task, task_id)
    if task is None:
        raise NotFoundError(f"task {task_id} not found")
    if caller_allocation_id is None and not user.admin and task.owner_id != user.id:
        raise ForbiddenError(f"user {user.username} cannot act on task {task_id}")
    return task


def context_directory(session: Session, task_id: str) -> bytes | None:
    """The stored model-definition archive (``.tar.gz``) of a task's experiment, or the files
    uploaded with an interactive task, if any."""
    task = session.get(Task, task_id)
    if task is None:
        raise NotFoundError(f"task {task_id} not found")
    if task.experiment_id is None:
        return task.context
    experiment = session.get(Experiment, task.experiment_id)
    return experiment.model_definition if experiment is not None else None


# --- preemption -------------------------------------------------------------------------------


STOPPING_STATES = frozenset({"TERMINATING", "TERMINATED"})
"""Allocation states in which the task is told to stop as well (a kill is under way)."""


def should_preempt(allocation: Allocation) -> bool:
    """What the preemption long-poll answers: asked to stop early, or being killed."""
    return bool(allocation.preempt_requested) or allocation.state in STOPPING_STATES


def preemption_requested(session: Session, allocation_id: str) -> bool:
    """:func:`should_preempt` of an allocation by id."""
    return should_preempt(get_allocation(session, allocation_id))


def request_preemption(session: Session, allocation_id: str) -> bool:
    """Ask an allocation to stop early (idempotent); returns False if it already was asked.

    Flushes but does not commit: commit, then ``notifier.notify(allocation_key(id))``.
    """
    allocation = get_allocation(session, allocation_id)
    if allocation.preempt_requested:
        return False
    allocation.preempt_requested = True
    session.flush()
    return True


def signal_preemption(sessions: SessionFactory, notifier: Notifier, allocation_id: str) -> bool:
    """:func:`request_preemption` in its own transaction, then wake the allocation's long-polls.

    Safe from any thread; returns False if the allocation already was asked.
    """
    with sessions() as session:
        changed = request_preemption(session, allocation_id)
        session.commit()
    notifier.notify(allocation_key(allocation_id))
    return changed


def ack_preemption(session: Session, allocation_id: str) -> None:
    """Record that the task saw the preemption signal (its exit 0 is then not final)."""
    allocation = get_allocation(session, allocation_id)
    allocation.preempt_acked = True
    session.flush()


def set_accelerator_data(session: Session, allocation_id: str, data: dict[str, Any]) -> None:
    """Store what the task reported about its accelerators (``acceleratorData``)."""
    allocation = get_allocation(session, allocation_id)
    allocation.accelerator_data = data
    session.flush()


def record_pull_time(allocation: Allocation, seconds: float | None) -> bool:
    """Store how long a container of ``allocation`` spent pulling its image; the allocation
    keeps the longest (its start waited for every container). True when the value changed."""
    if seconds is None or (allocation.pull_seconds or 0.0) >= seconds > 0.0:
        return False
    if seconds <= 0.0 and allocation.pull_seconds is not None:
        return False
    allocation.pull_seconds = round(seconds, 3)
    return True


# --- containers and rendezvous ------------------------------------------------------------------


def container_id(allocation_id: str, rank: int = 0) -> str:
    """The stable container (resources) id of one container of an allocation."""
    return str(uuid.uuid5(_CONTAINER_NAMESPACE, f"{allocation_id}/{rank}"))


@dataclass(frozen=True)
class ContainerPlacement:
    """One container of an allocation: its id, rank, agent, address and slot count."""

    container_id: str
    rank: int
    agent_id: str | None
    address: str
    slots: int


@dataclass(frozen=True)
class RendezvousInfo:
    """``v1RendezvousInfo``: every container's address and slot count, and the caller's rank."""

    addresses: list[str]
    rank: int
    slots: list[int]


def _agent_address(session: Session, agent_id: str | None) -> str:
    if agent_id is None:
        return LOOPBACK
    agent = session.get(Agent, agent_id)
    if agent is None or not agent.addresses:
        return LOOPBACK
    return str(agent.addresses[0])


def allocation_containers(session: Session, allocation: Allocation) -> list[ContainerPlacement]:
    """The containers of an allocation in rank order (today always exactly one)."""
    return [
        ContainerPlacement(
            container_id=container_id(allocation.id, 0),
            rank=0,
            agent_id=allocation.agent_id,
            address=_agent_address(session, allocation.agent_id),
            slots=allocation.slots,
        )
    ]


def rendezvous_info(session: Session, allocation: Allocation, resources_id: str) -> RendezvousInfo:
    """The rendezvous answer for container ``resources_id`` of ``allocation``.

    An unknown resources id of a single-container allocation is rank 0 (launchers that name
    their container themselves keep working); of a multi-container allocation it is a 404.
    """
    containers = allocation_containers(session, allocation)
    ranks = {c.container_id: c.rank for c in containers}
    if resources_id in ranks:
        rank = ranks[resources_id]
    elif len(containers) == 1:
        rank = 0
    else:
        raise NotFoundError(f"allocation {allocation.id} has no resources {resources_id}")
    return RendezvousInfo(
        addresses=[c.address for c in containers],
        rank=rank,
        slots=[c.slots for c in containers],
    )


# --- all-gather --------------------------------------------------------------------------------


@dataclass
class _Round:
    num_peers: int
    data: dict[str, Any] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: list[Any] = field(default_factory=list)


class AllGather:
    """Per-key all-gather rounds: each of ``num_peers`` participants posts once (by its request
    UUID) and all of them get every participant's data, in arrival order.

    A retried request (same UUID) replaces its data, and after a round completes a retry still
    gets that round's result; the first new UUID starts the next round. Must be used from one
    event loop. A participant that times out or is cancelled is withdrawn from its round.
    """

    def __init__(self) -> None:
        self._rounds: dict[str, _Round] = {}

    async def gather(
        self,
        key: str,
        request_uuid: str,
        num_peers: int,
        data: Any,
        *,
        timeout: float,
        on_complete: Callable[[list[Any]], None] | None = None,
    ) -> list[Any]:
        """Contribute ``data`` and wait (at most ``timeout`` seconds) for the round's result."""
        if num_peers < 1:
            raise InvalidArgumentError("numPeers must be at least 1")
        current = self._rounds.get(key)
        if current is not None and current.done.is_set() and request_uuid not in current.data:
            current = None
        if current is None:
            current = _Round(num_peers=num_peers)
            self._rounds[key] = current
        elif current.num_peers != num_peers:
            raise InvalidArgumentError(
                f"all gather of {key} expects {current.num_peers} peers, got numPeers={num_peers}"
            )
        if current.done.is_set():
            return list(current.result)
        current.data[request_uuid] = data
        if len(current.data) >= current.num_peers:
            current.result = list(current.data.values())
            current.done.set()
            if on_complete is not None:
                on_complete(list(current.result))
            return list(current.result)
        try:
            await asyncio.wait_for(current.done.wait(), timeout)
        except TimeoutError:
            got = len(current.data)
            current.data.pop(request_uuid, None)
            raise FailedPreconditionError(
                f"all gather of {key} timed out after {timeout:g}s with {got} of "
                f"{current.num_peers} peers"
            ) from None
        except asyncio.CancelledError:
            if not current.done.is_set():
                current.data.pop(request_uuid, None)
            raise
        return list(current.result)
