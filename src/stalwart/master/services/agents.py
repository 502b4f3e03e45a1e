"""Agents and their slots: the rows the agent resource manager and the scheduler work with.

Everything here adds or changes rows and flushes; nothing commits and nothing talks to the
network, so the agent RM can register an agent and assign slots in one transaction.

Contracts:

- :func:`register_agent` is idempotent (an agent that reconnects re-registers): it creates or
  refreshes the agent, adds new slots, refreshes the device facts of known ones (keeping their
  enabled / draining flags and assignment) and drops reported-missing slots that are free. It
  stores the report's :func:`report_digest` on the agent, unless a missing slot had to be kept
  (it is still assigned): the next registration then drops it once it is free.
- :func:`assign_slots` is all-or-nothing: every slot must exist, be enabled, not draining, and
  be free or already held by the same allocation; otherwise FailedPreconditionError and nothing
  changes. :func:`release_slots` frees whatever an allocation holds (idempotent).
- Device types are stored as ``cpu``, ``cuda`` or ``rocm`` (``TYPE_CUDA`` etc. are accepted).
- :func:`resource_pools` only reads: the pools of the master config and of connected agents.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from stalwart.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import Agent, Allocation, Container, Slot, utcnow
from stalwart.master.transitions import (
    LIVE_ALLOCATION_STATES,
    PLACED_ALLOCATION_STATES,
    set_allocation_state,
    set_container_state,
)

__all__ = [
    "DEVICE_TYPES",
    "PoolView",
    "SlotSpec",
    "assign_slots",
    "free_slots",
    "get_agent",
    "heartbeat",
    "list_agents",
    "mark_disconnected",
    "normalize_device_type",
    "pass_slots_on",
    "queued_successor",
    "register_agent",
    "release_slots",
    "report_digest",
    "resource_pools",
    "set_agent_enabled",
    "set_slot_enabled",
    "slots_of",
    "withdraw_successor",
]

DEVICE_TYPES = ("cpu", "cuda", "rocm")

SlotSpec = tuple[str, str, str, str]
"""``(slot_id, device_type, brand, uuid)`` of one slot an agent reports."""


def normalize_device_type(value: str) -> str:
    """``cpu``, ``cuda`` or ``rocm`` from either spelling; InvalidArgumentError otherwise."""
    name = value.strip().lower().removeprefix("type_")
    if name == "gpu":
        name = "cuda"
    if name not in DEVICE_TYPES:
        raise InvalidArgumentError(f"unknown device type {value!r} (cpu, cuda or rocm)")
    return name


def report_digest(
    version: str, resource_pool: str, addresses: Sequence[str], slots: Sequence[SlotSpec]
) -> str:
    """SHA-256 (hex) of what an agent registers with: equal reports, equal digests."""
    report = [version, resource_pool, list(addresses), [list(slot) for slot in slots]]
    return hashlib.sha256(json.dumps(report).encode()).hexdigest()


def _device_index(slot_id: str, position: int) -> int:
    return int(slot_id) if slot_id.isdigit() else position


def register_agent(
    session: Session,
    agent_id: str,
    *,
    slots: Sequence[SlotSpec],
    resource_pool: str = "default",
    addresses: Sequence[str] = (),
    version: str = "",
    now: dt.datetime | None = None,
) -> Agent:
    """Create or refresh an agent and its slots (see the module contract); ``now``: the
    heartbeat's time (default the current time)."""
    if not agent_id:
        raise InvalidArgumentError("an agent needs an id")
    ids = [spec[0] for spec in slots]
    if len(set(ids)) != len(ids):
        raise InvalidArgumentError(f"agent {agent_id} reports duplicate slot ids: {ids}")
    now = now or utcnow()
    agent = session.get(Agent, agent_id)
    if agent is None:
        agent = Agent(id=agent_id, registered_time=now, enabled=True, draining=False)
        session.add(agent)
    agent.version = version
    agent.resource_pool = resource_pool
    agent.addresses = list(addresses)
    agent.last_heartbeat = now
    agent.connected = True
    if agent.registered_time is None:
        agent.registered_time = now

    known = {s.slot_id: s for s in session.scalars(select(Slot).where(Slot.agent_id == agent_id))}
    for position, (slot_id, device_type, brand, device_uuid) in enumerate(slots):
        kind = normalize_device_type(device_type)
        slot = known.pop(slot_id, None)
        if slot is None:
            slot = Slot(agent_id=agent_id, slot_id=slot_id, enabled=True, draining=False)
            session.add(slot)
        slot.device_type = kind
        slot.device_brand = brand
        slot.device_uuid = device_uuid
        slot.device_index = _device_index(slot_id, position)
    kept = False
    for gone in known.values():
        if gone.allocation_id is None:
            session.delete(gone)
        else:
            kept = True
    digest = report_digest(version, resource_pool, addresses, slots)
    agent.registered_report = None if kept else digest
    session.flush()
    return agent


def get_agent(session: Session, agent_id: str) -> Agent:
    """The agent, or NotFoundError (404)."""
    agent = session.get(Agent, agent_id)
    if agent is None:
        raise NotFoundError(f"agent {agent_id} not found")
    return agent


def heartbeat(session: Session, agent_id: str, *, now: dt.datetime | None = None) -> Agent:
    """Record that the agent is alive (and connected) at ``now`` (default the current
    time)."""
    agent = get_agent(session, agent_id)
    agent.last_heartbeat = now or utcnow()
    agent.connected = True
    session.flush()
    return agent


def mark_disconnected(session: Session, agent_id: str) -> Agent:
    """The agent's connection is gone; its slots stay assigned until released."""
    agent = get_agent(session, agent_id)
    agent.connected = False
    session.flush()
    return agent


def list_agents(session: Session) -> list[Agent]:
    """Every registered agent, by id."""
    return list(session.scalars(select(Agent).order_by(Agent.id)))


def slots_of(session: Session, agent_ids: Iterable[str]) -> dict[str, list[Slot]]:
    """The slots of the given agents, by agent id, each list ordered by device index."""
    wanted = list(agent_ids)
    out: dict[str, list[Slot]] = {a: [] for a in wanted}
    if not wanted:
        return out
    rows = session.scalars(
        select(Slot)
        .where(Slot.agent_id.in_(wanted))
        .order_by(Slot.agent_id, Slot.device_index, Slot.slot_id)
    )
    for slot in rows:
        out[slot.agent_id].append(slot)
    return out


def free_slots(session: Session, *, resource_pool: str | None = None) -> list[Slot]:
    """Slots the scheduler may assign: free, enabled, not draining, on enabled, connected,
    non-draining agents (of ``resource_pool`` when given)."""
    query = (
        select(Slot)
        .join(Agent, Agent.id == Slot.agent_id)
        .where(
            Slot.allocation_id.is_(None),
            Slot.enabled.is_(True),
            Slot.draining.is_(False),
            Agent.enabled.is_(True),
            Agent.draining.is_(False),
            Agent.connected.is_(True),
        )
        .order_by(Slot.agent_id, Slot.device_index, Slot.slot_id)
    )
    if resource_pool is not None:
        query = query.where(Agent.resource_pool == resource_pool)
    return list(session.scalars(query))


def assign_slots(
    session: Session, agent_id: str, slot_ids: Sequence[str], allocation_id: str
) -> list[Slot]:
    """Give slots of one agent to an allocation (all or nothing; see the module contract).

    Also records the agent on the allocation when it has none yet.
    """
    get_agent(session, agent_id)
    chosen: list[Slot] = []
    for slot_id in slot_ids:
        slot = session.get(Slot, (agent_id, slot_id))
        if slot is None:
            raise FailedPreconditionError(f"agent {agent_id} has no slot {slot_id}")
        if slot.allocation_id not in (None, allocation_id):
            raise FailedPreconditionError(
                f"slot {slot_id} of agent {agent_id} is held by {slot.allocation_id}"
            )
        if not slot.enabled or slot.draining:
            raise FailedPreconditionError(f"slot {slot_id} of agent {agent_id} is disabled")
        chosen.append(slot)
    for slot in chosen:
        slot.allocation_id = allocation_id
    allocation = session.get(Allocation, allocation_id)
    if allocation is not None and allocation.agent_id is None:
        allocation.agent_id = agent_id
    session.flush()
    return chosen


def release_slots(session: Session, allocation_id: str) -> int:
    """Free every slot held by an allocation; returns how many were freed. One UPDATE (slot
    rows already loaded in the session are updated with it; pending changes are flushed
    first)."""
    freed: CursorResult[Any] = session.execute(  # type: ignore[assignment]
        update(Slot)
        .where(Slot.allocation_id == allocation_id)
        .values(allocation_id=None)
        .execution_options(synchronize_session="evaluate")
    )
    return freed.rowcount


def queued_successor(session: Session, allocation_id: str) -> Allocation | None:
    """The live allocation queued behind ``allocation_id`` (``after_allocation_id``: placed on
    its slots, to start when it exits), or None; an allocation has at most one."""
    return session.scalar(
        select(Allocation).where(
            Allocation.after_allocation_id == allocation_id,
            Allocation.state.in_(LIVE_ALLOCATION_STATES),
        )
    )


def pass_slots_on(session: Session, allocation_id: str) -> str | None:
    """An allocation ended: its slots go to its live queued successor (the allocation placed
    behind it, ``after_allocation_id``), which then holds them like any placed allocation (its
    ``after_allocation_id`` cleared); without one they are freed (:func:`release_slots`).
    The successor's id, or None."""
    successor = queued_successor(session, allocation_id)
    if successor is None:
        release_slots(session, allocation_id)
        return None
    session.execute(
        update(Slot)
        .where(Slot.allocation_id == allocation_id)
        .values(allocation_id=successor.id)
        .execution_options(synchronize_session="evaluate")
    )
    successor.after_allocation_id = None
    return successor.id


def withdraw_successor(session: Session, allocation_id: str, why: str) -> str | None:
    """The live queued successor of ``allocation_id`` (see :func:`pass_slots_on`) no longer
    waits on its slots: it ends now, never started (TERMINATED; its containers EXITED with
    ``why``), with no consequence for its trial, which the cluster loop gives a new allocation
    that waits like any other. Its agent, still holding it, is told to drop it at its next
    sync (a container the master recorded as exited is killed, then forgotten). For a
    predecessor asked to give its slots to other work (preemption): the successor must not
    take them when it exits. The successor's id, or None. The caller commits and wakes it."""
    successor = queued_successor(session, allocation_id)
    if successor is None:
        return None
    for container in session.scalars(
        select(Container).where(Container.allocation_id == successor.id)
    ):
        if container.state != "EXITED":
            set_container_state(session, container, "EXITED", reason=why)
    successor.exit_reason = why
    successor.after_allocation_id = None
    set_allocation_state(session, successor, "TERMINATED")
    return successor.id


def set_agent_enabled(session: Session, agent_id: str, *, enabled: bool, drain: bool) -> Agent:
    """Enable an agent, or disable it (``drain``: let running work finish, start nothing new)."""
    agent = get_agent(session, agent_id)
    agent.enabled = enabled
    agent.draining = (not enabled) and drain
    session.flush()
    return agent


def set_slot_enabled(
    session: Session, agent_id: str, slot_id: str, *, enabled: bool, drain: bool
) -> Slot:
    """Enable one slot, or disable it (``drain`` as for agents)."""
    slot = session.get(Slot, (agent_id, slot_id))
    if slot is None:
        raise NotFoundError(f"slot {slot_id} of agent {agent_id} not found")
    slot.enabled = enabled
    slot.draining = (not enabled) and drain
    session.flush()
    return slot


@dataclass(frozen=True)
class PoolView:
    """One resource pool as ``GET /api/v1/resource-pools`` reports it.

    ``slot_type`` is ``cuda``, ``rocm`` or ``cpu`` (the pool's best device, as the scheduler
    decides it); ``slots_available`` counts the enabled slots of its connected, enabled agents
    and ``slots_used`` those of them an allocation holds; ``queued`` and ``scheduled`` count the
    live allocations of the pool that wait for slots and that hold them.
    """

    name: str
    description: str
    num_agents: int
    slots_per_agent: int
    slot_type: str
    slots_available: int
    slots_used: int
    queued: int
    scheduled: int


def resource_pools(session: Session, configured: Sequence[Mapping[str, Any]]) -> list[PoolView]:
    """Every resource pool: the ``default`` pool, then the configured ones (``configured`` is the
    master config's ``resource_pools``, in its order), then pools that only agents serve (sorted).
    Disconnected agents count for nothing."""
    names: dict[str, str] = {"default": ""}
    for entry in configured:
        name = entry.get("pool_name")
        if isinstance(name, str) and name:
            desc = entry.get("description")
            names[name] = desc if isinstance(desc, str) else ""
    agents = list(session.scalars(select(Agent).where(Agent.connected.is_(True))))
    for extra in sorted({a.resource_pool for a in agents} - set(names)):
        names[extra] = ""
    slots: dict[str, list[Slot]] = {a.id: [] for a in agents}
    for slot in session.scalars(select(Slot).where(Slot.agent_id.in_(list(slots)))):
        slots[slot.agent_id].append(slot)
    counts: dict[tuple[str, bool], int] = {}
    rows = session.execute(
        select(Allocation.resource_pool, Allocation.state).where(
            Allocation.state.in_(LIVE_ALLOCATION_STATES)
        )
    )
    for pool, state in rows:
        key = (str(pool), state in PLACED_ALLOCATION_STATES)
        counts[key] = counts.get(key, 0) + 1
    out = []
    for name, description in names.items():
        members = [a for a in agents if a.resource_pool == name]
        usable = [s for a in members if a.enabled for s in slots[a.id] if s.enabled]
        kinds = {s.device_type for a in members for s in slots[a.id]}
        out.append(
            PoolView(
                name=name,
                description=description,
                num_agents=len(members),
                slots_per_agent=max((len(slots[a.id]) for a in members), default=0),
                slot_type="cuda" if "cuda" in kinds else "rocm" if "rocm" in kinds else "cpu",
                slots_available=len(usable),
                slots_used=sum(1 for s in usable if s.allocation_id is not None),
                queued=counts.get((name, False), 0),
                scheduled=counts.get((name, True), 0),
            )
        )
    return out
