"""One scheduling round against the database: read a snapshot, place what the policy decides.

- :func:`read_snapshot` reads agents, slots and every allocation that waits or holds slots into
  a :class:`~stalwart.master.scheduler.Snapshot`.
- :class:`Claimer` applies the assignments of one decision in the snapshot's transaction
  (under the state lock; the caller commits once): for each, a compare-and-set claim of the
  slots (``UPDATE slots ... WHERE allocation_id IS NULL``, row counts checked), then the claim
  every engine shares (:func:`~stalwart.master.rm.claim.claim_allocation`: ports, token, one
  container per agent with its :class:`~stalwart.agent.protocol.TaskSpec`, ASSIGNED). A
  claim the database refuses (a slot taken or disabled since the snapshot) is undone and
  skipped (None, nothing of it kept); the next round decides again. The snapshot is never
  trusted over the database.

Device type of a request: the pool's GPU type when its agents have GPUs, else ``cpu`` (agents
without GPUs offer CPU slots, as Determined's do).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from stalwart.config.experiment import ExperimentConfig
from stalwart.config.resources import ResourcesConfig
from stalwart.config.searcher import GridSearcher, RandomSearcher
from stalwart.master.db.tables import (
    LIVE_CONTAINER_STATES,
    Agent,
    Allocation,
    Container,
    Experiment,
    Slot,
    Task,
)
from stalwart.master.rm.claim import StartupHookOf, claim_allocation
from stalwart.master.scheduler import (
    AgentView,
    DeviceType,
    FittingPolicy,
    GroupLimits,
    Placement,
    PoolSettings,
    Request,
    SchedulerType,
    SlotView,
    Snapshot,
)
from stalwart.master.searcher.factory import searcher_class
from stalwart.master.services.agents import queued_successor
from stalwart.master.services.allocations import LOOPBACK
from stalwart.master.services.experiment_config import typed_config_of
from stalwart.master.services.interactive import task_resources
from stalwart.master.services.log_policies import excluded_agents
from stalwart.master.services.task_spec import (
    ContainerPlan,
    free_port_offset,
)
from stalwart.master.settings import MasterSettings
from stalwart.master.transitions import LIVE_ALLOCATION_STATES, PLACED_ALLOCATION_STATES

__all__ = [
    "Claimed",
    "Claimer",
    "pool_settings",
    "read_snapshot",
    "unschedulable_reason",
]

_SLOTS = Slot.metadata.tables[Slot.__tablename__]


@dataclass(frozen=True)
class Claimed:
    """A committed placement: the agents to wake."""

    allocation_id: str
    agent_ids: tuple[str, ...]


def pool_settings(settings: MasterSettings) -> dict[str, PoolSettings]:
    """The scheduler settings of each configured resource pool."""
    out: dict[str, PoolSettings] = {}
    for entry in settings.resource_pools:
        name = entry.get("pool_name")
        sched = entry.get("scheduler") or {}
        if not isinstance(name, str) or not isinstance(sched, Mapping):
            continue
        kind: SchedulerType = "fair_share" if sched.get("type") == "fair_share" else "priority"
        fitting: FittingPolicy = "worst" if sched.get("fitting_policy") == "worst" else "best"
        out[name] = PoolSettings(
            scheduler=kind, preemption=bool(sched.get("preemption", False)), fitting_policy=fitting
        )
    return out


def _pool_device(kinds: set[str]) -> DeviceType:
    if "cuda" in kinds:
        return "cuda"
    if "rocm" in kinds:
        return "rocm"
    return "cpu"


def read_snapshot(session: Session, settings: MasterSettings) -> Snapshot:
    """The cluster as the scheduler sees it (see the module docstring). Reads columns, not
    ORM objects: it runs every round."""
    agents = session.execute(
        select(Agent.id, Agent.resource_pool, Agent.enabled, Agent.draining).where(
            Agent.connected.is_(True)
        )
    ).all()
    slots_by_agent: dict[str, list[SlotView]] = {a.id: [] for a in agents}
    kinds_by_agent: dict[str, set[str]] = {a.id: set() for a in agents}
    for slot in session.execute(
        select(
            Slot.agent_id,
            Slot.slot_id,
            Slot.device_type,
            Slot.allocation_id,
            Slot.enabled,
            Slot.draining,
        ).order_by(Slot.agent_id, Slot.device_index)
    ):
        if slot.agent_id in slots_by_agent:
            kinds_by_agent[slot.agent_id].add(slot.device_type)
            slots_by_agent[slot.agent_id].append(
                SlotView(
                    id=slot.slot_id,
                    device_type=_device(slot.device_type),
                    free=slot.allocation_id is None,
                    enabled=slot.enabled and not slot.draining,
                )
            )
    pool_devices: dict[str, DeviceType] = {}
    views = []
    for agent in agents:
        views.append(
            AgentView(
                id=agent.id,
                pool=agent.resource_pool,
                enabled=agent.enabled,
                draining=agent.draining,
                slots=tuple(slots_by_agent[agent.id]),
            )
        )
        device = _pool_device(kinds_by_agent[agent.id])
        if device != "cpu" or agent.resource_pool not in pool_devices:
            pool_devices[agent.resource_pool] = device
    rows = session.execute(
        select(
            Allocation.id,
            Allocation.task_id,
            Allocation.state,
            Allocation.slots,
            Allocation.resource_pool,
            Allocation.preempt_requested,
            Task.experiment_id,
            Task.config,
            Task.start_time,
            Task.extra,
            Allocation.after_allocation_id,
        )
        .join(Task, Task.task_id == Allocation.task_id)
        .where(Allocation.state.in_(LIVE_ALLOCATION_STATES))
        .order_by(Allocation.id)
    ).all()
    # A queued successor neither waits nor holds slots (they are its predecessor's until it
    # ends): the scheduler does not see it, only that its predecessor has one.
    with_successor = {row.after_allocation_id for row in rows if row.after_allocation_id}
    rows = [row for row in rows if row.after_allocation_id is None]
    # One config per experiment (not per allocation: a config is decoded JSON of some size).
    wanted = select(Experiment.id, Experiment.config).where(
        Experiment.id.in_({row.experiment_id for row in rows if row.experiment_id is not None})
    )
    configs = {row.id: typed_config_of(row.id, row.config) for row in session.execute(wanted)}
    placed = _assignments(
        session, [row.id for row in rows if row.state in PLACED_ALLOCATION_STATES]
    )
    requests, groups = [], {}
    for row in rows:
        exp_id = row.experiment_id
        res, group = _resources(configs, exp_id, row.config, row.task_id)
        running = row.state in PLACED_ALLOCATION_STATES
        requests.append(
            Request(
                allocation_id=row.id,
                group_id=group,
                slots_needed=row.slots,
                pool=row.resource_pool,
                priority=res.priority if res.priority is not None else 42,
                weight=float(res.weight or 1.0),
                submitted_order=_submitted_order(exp_id, row.start_time),
                is_single_node=res.is_single_node,
                device_type=pool_devices.get(row.resource_pool, "cpu"),
                running=running,
                assignment=placed.get(row.id, ()) if running else (),
                preempting=bool(row.preempt_requested) if running else False,
                blocked_agents=excluded_agents(row.extra) if exp_id is not None else frozenset(),
                has_successor=row.id in with_successor,
            )
        )
        config = configs.get(exp_id) if exp_id is not None else None
        cap = _search_cap(config)
        groups[group] = GroupLimits(
            group_id=group,
            max_slots=res.max_slots,
            max_concurrent=cap,
            successors=cap is not None and settings.cluster.queue_successors,
        )
    return Snapshot(
        agents=tuple(views),
        requests=tuple(r for r in requests if not r.running or r.assignment),
        groups=tuple(groups.values()),
        pools=pool_settings(settings),
    )


def _search_cap(config: ExperimentConfig | None) -> int | None:
    """The experiment's ``max_concurrent_trials`` when its searcher may create trials ahead
    (random, grid: :attr:`~stalwart.master.searcher.base.SearchMethod.may_run_ahead`), for the
    scheduler to cap what runs; None otherwise (the searcher itself keeps the limit)."""
    if config is None or not searcher_class(config).may_run_ahead:
        return None
    searcher = config.searcher
    if not isinstance(searcher, RandomSearcher | GridSearcher):
        return None
    return searcher.max_concurrent_trials or None


def _resources(
    configs: Mapping[int, ExperimentConfig],
    experiment_id: int | None,
    task_config: Mapping[str, Any] | None,
    task_id: str,
) -> tuple[ResourcesConfig, str]:
    """The resources section and scheduling group of an allocation: its experiment's, or an
    interactive task's own (each interactive task is a group of its own and goes ahead of
    experiments of the same priority, as the user waits for it)."""
    if experiment_id is not None:
        config = configs.get(experiment_id)
        return (config.resources if config is not None else ResourcesConfig()), str(experiment_id)
    if task_config is not None:
        return task_resources(task_config), task_id
    return ResourcesConfig(), task_id


def _submitted_order(experiment_id: int | None, task_start: dt.datetime) -> int:
    """An experiment's id; an interactive task's launch time in ms minus 10**13: negative and
    growing, so interactive tasks go first in FIFO order among themselves and ahead of
    experiments of the same priority (their user waits at a prompt)."""
    if experiment_id is not None:
        return int(experiment_id)
    return int(task_start.timestamp() * 1000) - 10**13


def unschedulable_reason(snapshot: Snapshot, request: Request) -> str | None:
    """Why ``request`` cannot start however long it waits, in words for the trial's log, or
    None when it only waits for busy slots to free up."""
    agents = [
        a
        for a in snapshot.agents
        if a.pool == request.pool and a.schedulable and a.id not in request.blocked_agents
    ]
    if not agents:
        return (
            f"waiting: no agent serves resource pool {request.pool!r}; start one with "
            f"`stalwart agent --pool {request.pool}` (or set resources.resource_pool)"
        )
    if request.slots_needed == 0:
        return None
    usable = [
        sum(1 for s in a.slots if s.enabled and s.device_type == request.device_type)
        for a in agents
    ]
    capacity = max(usable) if request.is_single_node else sum(usable)
    if capacity >= request.slots_needed:
        return None
    where = "on one agent" if request.is_single_node else "in total"
    what, setting = ("the trial", "slots_per_trial")
    if request.group_id == request.allocation_id.rsplit(".", 1)[0]:  # an interactive task
        what, setting = ("the task", "slots")
    return (
        f"waiting: {what} needs {request.slots_needed} {request.device_type} slots but "
        f"resource pool {request.pool!r} has {capacity} {where}; add agents or lower "
        f"resources.{setting}"
    )


def _device(value: str) -> DeviceType:
    return "cuda" if value == "cuda" else "rocm" if value == "rocm" else "cpu"


def _assignments(session: Session, allocation_ids: Sequence[str]) -> dict[str, Placement]:
    out: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    if not allocation_ids:
        return {}
    rows = session.execute(  # columns, not objects: this runs every round
        select(Container.allocation_id, Container.agent_id, Container.slot_ids)
        .where(Container.allocation_id.in_(list(allocation_ids)))
        .order_by(Container.allocation_id, Container.rank)
    )
    for allocation_id, agent_id, slot_ids in rows:
        out.setdefault(allocation_id, []).append((agent_id, tuple(str(s) for s in slot_ids)))
    return {k: tuple(v) for k, v in out.items()}


class Claimer:
    """Applies the assignments of one decision in the caller's transaction, under the state
    lock (the caller commits once, after the last). :meth:`claim_all` reads the rows every
    claim looks up first and holds them in the session's identity map. Ports come from offsets
    at or above ``first_port_offset`` (the master's ``cluster.task_port_offset``); the offsets
    in use on an agent are read once and kept up to date with each claim."""

    def __init__(
        self,
        session: Session,
        *,
        cluster_id: str,
        first_port_offset: int = 0,
        startup_hook_of: StartupHookOf | None = None,
    ) -> None:
        self._session = session
        self._cluster_id = cluster_id
        self._first_port_offset = first_port_offset
        self._startup_hook_of = startup_hook_of
        self._offsets: dict[str, set[int]] = {}
        self._held: list[object] = []  # preloaded rows, kept in the session's identity map

    def claim_all(self, assignments: Mapping[str, Placement]) -> list[Claimed]:
        """Apply the assignments in allocation id order; the ones claimed. The rows every
        claim looks up (allocations, their tasks, the agents and their slots) are read first,
        in three queries."""
        if not assignments:
            return []
        session = self._session
        ids = sorted(assignments)
        agents = sorted({agent for p in assignments.values() for agent, _ in p})
        for allocation, task in session.execute(
            select(Allocation, Task)
            .join(Task, Task.task_id == Allocation.task_id)
            .where(Allocation.id.in_(ids))
        ):
            self._held += (allocation, task)
        self._held += session.scalars(select(Agent).where(Agent.id.in_(agents)))
        self._held += session.scalars(select(Slot).where(Slot.agent_id.in_(agents)))
        claimed = [self.claim(allocation_id, assignments[allocation_id]) for allocation_id in ids]
        return [c for c in claimed if c is not None]

    def claim(self, allocation_id: str, placement: Placement) -> Claimed | None:
        """Apply one assignment (see the module docstring); None, with nothing of it written,
        when the allocation is no longer waiting, a slot is taken or disabled, or its task is
        gone."""
        session = self._session
        allocation = session.get(Allocation, allocation_id)
        if allocation is None or allocation.state not in ("PENDING", "WAITING"):
            return None
        for agent_id, slot_ids in placement:
            if not slot_ids:
                continue
            # Core statements on the session's connection (the slots' objects are not kept in
            # step: the claimer never reads a slot's holder from them), not the ORM's bulk
            # update, which costs more than the statement.
            claimed = session.connection().execute(
                update(_SLOTS)
                .where(
                    _SLOTS.c.agent_id == agent_id,
                    _SLOTS.c.slot_id.in_(list(slot_ids)),
                    _SLOTS.c.allocation_id.is_(None),
                    _SLOTS.c.enabled.is_(True),
                )
                .values(allocation_id=allocation_id)
            )
            if claimed.rowcount != len(slot_ids):
                self._unclaim(allocation_id)
                return None
        return self._finish(allocation, placement)

    def claim_behind(self, allocation_id: str, predecessor_id: str) -> Claimed | None:
        """Place a waiting allocation as the queued successor of a running one
        (:mod:`~stalwart.master.scheduler.successors`): on the slots of its one container, which
        stay the predecessor's (no slot changes hands now: :func:`~stalwart.master.services.
        agents.pass_slots_on` passes them when it ends). None, with nothing written, unless the
        allocation still waits and the predecessor still runs there, holding its slots, not
        asked to stop, with no successor of its own and not queued itself."""
        session = self._session
        allocation = session.get(Allocation, allocation_id)
        before = session.get(Allocation, predecessor_id)
        if allocation is None or allocation.state not in ("PENDING", "WAITING"):
            return None
        if (
            before is None
            or before.state not in ("ASSIGNED", "PULLING", "STARTING", "RUNNING")
            or before.preempt_requested
            or before.after_allocation_id is not None
            or before.slots != allocation.slots
        ):
            return None
        rows = list(session.scalars(select(Container).where(Container.allocation_id == before.id)))
        if len(rows) != 1 or rows[0].state not in LIVE_CONTAINER_STATES:
            return None
        if queued_successor(session, before.id) is not None:
            return None
        held = session.scalars(
            select(Slot.slot_id).where(Slot.allocation_id == before.id, Slot.enabled.is_(True))
        )
        slot_ids = tuple(str(s) for s in rows[0].slot_ids)
        if sorted(held) != sorted(slot_ids):
            return None
        return self._finish(allocation, ((rows[0].agent_id, slot_ids),), after=before.id)

    def _finish(
        self, allocation: Allocation, placement: Placement, *, after: str | None = None
    ) -> Claimed | None:
        """The claim every engine shares, for slots already settled; None (the slots this
        claim took freed again) when the task cannot be described."""
        session = self._session
        allocation_id = allocation.id
        agent_ids = [agent_id for agent_id, _ in placement]
        plans = _plans(session, placement)
        slots = [session.get(Slot, (p.agent_id, p.slot_ids[0])) for p in plans if p.slot_ids]
        device: DeviceType = _device(slots[0].device_type) if slots and slots[0] else "cpu"
        offset = free_port_offset(self._used_offsets(agent_ids), self._first_port_offset)
        token = claim_allocation(
            session,
            allocation,
            plans,
            port_offset=offset,
            device_type=device,
            cluster_id=self._cluster_id,
            startup_hook_of=self._startup_hook_of,
            commit=False,
            after=after,
        )
        if token is None:
            if after is None:
                self._unclaim(allocation_id)
            return None
        for agent_id in agent_ids:
            self._offsets[agent_id].add(offset)
        return Claimed(allocation_id, tuple(agent_ids))

    def _unclaim(self, allocation_id: str) -> None:
        """Undo this claim's compare-and-set of slots (they were free: free them again)."""
        self._session.connection().execute(
            update(_SLOTS).where(_SLOTS.c.allocation_id == allocation_id).values(allocation_id=None)
        )

    def _used_offsets(self, agent_ids: Sequence[str]) -> set[int]:
        """Port offsets of the allocations with live containers on any of ``agent_ids``."""
        if missing := [a for a in agent_ids if a not in self._offsets]:
            for agent_id in missing:
                self._offsets[agent_id] = set()
            rows = self._session.execute(
                select(Container.agent_id, Allocation.ports)
                .join(Allocation, Container.allocation_id == Allocation.id)
                .where(
                    Container.agent_id.in_(missing),
                    Container.state.in_(LIVE_CONTAINER_STATES),
                )
            )
            for agent_id, ports in rows:
                if isinstance(ports, Mapping) and "offset" in ports:
                    self._offsets[agent_id].add(int(ports["offset"]))
        return set().union(*(self._offsets[a] for a in agent_ids))


def _plans(session: Session, placement: Placement) -> list[ContainerPlan]:
    plans = []
    for rank, (agent_id, slot_ids) in enumerate(placement):
        agent = session.get(Agent, agent_id)
        address = str(agent.addresses[0]) if agent is not None and agent.addresses else LOOPBACK
        indices = []
        for slot_id in slot_ids:
            slot = session.get(Slot, (agent_id, slot_id))
            indices.append(slot.device_index if slot is not None else 0)
        plans.append(
            ContainerPlan(
                rank=rank,
                agent_id=agent_id,
                address=address,
                slot_ids=tuple(slot_ids),
                device_indices=tuple(indices),
            )
        )
    return plans
