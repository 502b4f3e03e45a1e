"""What the scheduler sees (a :class:`Snapshot`) and what it answers (a :class:`Decision`).

Everything here is a frozen value: the scheduling loop reads the database once into a
``Snapshot``, calls :func:`stalwart.master.scheduler.schedule`, and applies the ``Decision``
itself. The policies never do I/O, never read a clock and never mutate these objects.

Vocabulary (Determined's):

- a *slot* is one device of an agent (a GPU, or a CPU slot on CPU-only agents); a request's
  slots are all of one ``device_type``;
- a *zero-slot* request (``slots_needed == 0``: commands, notebooks, CPU trials) takes no slot,
  only one of the agent's *auxiliary containers* (``max_aux_containers_per_agent``, default 100);
- a *group* is the job (experiment, command...) a request belongs to: fair share divides the
  pool between groups, ``max_slots`` and ``max_concurrent`` limit a group;
- *queue order* is ``(priority, submitted_order, allocation_id)``: a smaller priority number runs
  first (1-99, Determined's default 42), then the earlier submission.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "DEFAULT_MAX_AUX_CONTAINERS_PER_AGENT",
    "DEFAULT_PRIORITY",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "AgentView",
    "Decision",
    "DeviceType",
    "FittingPolicy",
    "GroupLimits",
    "Placement",
    "PoolSettings",
    "Request",
    "SchedulerType",
    "SlotView",
    "Snapshot",
    "placement_slots",
    "queue_key",
    "queue_order",
]

DeviceType = Literal["cpu", "cuda", "rocm"]
SchedulerType = Literal["priority", "fair_share"]
FittingPolicy = Literal["best", "worst"]

DEFAULT_PRIORITY = 42
"""Determined's default scheduling priority."""
MIN_PRIORITY = 1
MAX_PRIORITY = 99
DEFAULT_MAX_AUX_CONTAINERS_PER_AGENT = 100
"""Determined's default ``max_aux_containers_per_agent``."""

Placement = tuple[tuple[str, tuple[str, ...]], ...]
"""Where a request runs: ``((agent_id, (slot_id, ...)), ...)``, one entry per agent, agents and
slots in a deterministic order. A zero-slot request's placement is ``((agent_id, ()),)``: one
auxiliary container on that agent."""


def placement_slots(placement: Placement) -> frozenset[tuple[str, str]]:
    """The ``(agent_id, slot_id)`` pairs a placement uses (none for a zero-slot placement)."""
    return frozenset((agent, slot) for agent, slots in placement for slot in slots)


@dataclass(frozen=True)
class SlotView:
    """One slot of an agent.

    ``free``: no allocation holds it. ``enabled``: an operator has not disabled it (fold a
    draining slot into ``enabled=False``); a disabled slot is neither used nor counted as
    capacity.
    """

    id: str
    device_type: DeviceType
    free: bool = True
    enabled: bool = True


@dataclass(frozen=True)
class AgentView:
    """One agent of a pool. Disabled or draining agents get no new work (their running work
    stays where it is); their slots are no capacity for new requests."""

    id: str
    pool: str
    slots: tuple[SlotView, ...] = ()
    enabled: bool = True
    draining: bool = False

    def __post_init__(self) -> None:
        ids = [s.id for s in self.slots]
        if len(ids) != len(set(ids)):
            raise ValueError(f"agent {self.id!r} lists a slot id twice")

    @property
    def schedulable(self) -> bool:
        """Whether new work may be placed here."""
        return self.enabled and not self.draining


@dataclass(frozen=True)
class Request:
    """One allocation the scheduler must place (pending) or may preempt (running).

    ``priority``, ``weight`` and ``submitted_order`` come from the request's job; all requests of
    a group should carry the same ``weight`` (fair share uses the one of the group's first
    request in queue order). ``submitted_order`` is the caller's queue position: give all
    requests of a job its job's position to get Determined's job-level FIFO. A running request
    carries its ``assignment``; ``preempting`` says the master has already asked it to release
    its slots (they will free soon, and it is not preempted again).
    """

    allocation_id: str
    group_id: str
    slots_needed: int
    pool: str = "default"
    priority: int = DEFAULT_PRIORITY
    weight: float = 1.0
    submitted_order: int = 0
    preemptible: bool = True
    is_single_node: bool = False
    device_type: DeviceType = "cuda"
    running: bool = False
    assignment: Placement = ()
    preempting: bool = False
    blocked_agents: frozenset[str] = frozenset()
    """Agents the request must not be placed on (a trial's ``exclude_node`` log policies)."""
    has_successor: bool = False
    """A running request with a queued successor already waiting behind it
    (:mod:`~stalwart.master.scheduler.successors`)."""

    def __post_init__(self) -> None:
        if self.slots_needed < 0:
            raise ValueError(f"{self.allocation_id}: slots_needed must be >= 0")
        if not MIN_PRIORITY <= self.priority <= MAX_PRIORITY:
            raise ValueError(f"{self.allocation_id}: priority must be within 1-99")
        if not self.weight >= 0:
            raise ValueError(f"{self.allocation_id}: weight must be >= 0")
        if not self.running:
            if self.assignment or self.preempting:
                raise ValueError(f"{self.allocation_id}: a pending request has no assignment")
            return
        if self.slots_needed == 0:
            if len(self.assignment) != 1 or self.assignment[0][1]:
                raise ValueError(
                    f"{self.allocation_id}: a running zero-slot request is on one agent, "
                    "with no slots"
                )
        elif len(placement_slots(self.assignment)) != self.slots_needed:
            raise ValueError(
                f"{self.allocation_id}: a running request holds exactly slots_needed slots"
            )

    @property
    def key(self) -> tuple[int, int, str]:
        """Queue order: smaller first."""
        return queue_key(self)


def queue_key(request: Request) -> tuple[int, int, str]:
    """``(priority, submitted_order, allocation_id)``: the order requests are considered in."""
    return (request.priority, request.submitted_order, request.allocation_id)


def queue_order(requests: Iterable[Request]) -> list[Request]:
    """``requests`` in the order the schedulers consider them (:func:`queue_key`). The one
    definition of the queue: the policies take pending work in this order, and the job queue
    (``det job list``, :mod:`stalwart.master.services.job_queue`) shows jobs in it."""
    return sorted(requests, key=queue_key)


@dataclass(frozen=True)
class GroupLimits:
    """Limits of one group (job). ``None`` means no limit."""

    group_id: str
    max_slots: int | None = None
    max_concurrent: int | None = None
    successors: bool = False
    """The group's waiting requests may queue behind its running ones
    (:mod:`~stalwart.master.scheduler.successors`): a random or grid search whose next trials
    were created ahead (``max_concurrent`` then caps what runs)."""


@dataclass(frozen=True)
class PoolSettings:
    """A resource pool's scheduler settings (Determined's ``resource_pools[].scheduler``).

    ``preemption`` only matters to the priority scheduler: fair share always preempts, as in
    Determined.
    """

    scheduler: SchedulerType = "priority"
    preemption: bool = False
    fitting_policy: FittingPolicy = "best"
    allow_heterogeneous_fits: bool = False
    max_aux_containers_per_agent: int = DEFAULT_MAX_AUX_CONTAINERS_PER_AGENT


@dataclass(frozen=True)
class Snapshot:
    """The cluster as one scheduling round sees it.

    ``pools`` maps a pool name to its settings; a pool without an entry uses
    ``PoolSettings()`` (priority, no preemption, best fit). Agents serve only requests of their
    own pool.
    """

    agents: tuple[AgentView, ...] = ()
    requests: tuple[Request, ...] = ()
    groups: tuple[GroupLimits, ...] = ()
    pools: Mapping[str, PoolSettings] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for what, ids in (
            ("an agent", [a.id for a in self.agents]),
            ("an allocation", [r.allocation_id for r in self.requests]),
            ("a group", [g.group_id for g in self.groups]),
        ):
            if len(ids) != len(set(ids)):
                raise ValueError(f"a snapshot lists {what} id twice")

    def settings_for(self, pool: str) -> PoolSettings:
        """The pool's settings, or the defaults."""
        return self.pools.get(pool, PoolSettings())


@dataclass(frozen=True)
class Decision:
    """The scheduler's answer; the caller applies it.

    ``assignments``: pending requests to start now, each on the given placement (all of its slots,
    never part of them). ``preemptions``: running requests to ask to release their slots (the
    preemption signal; they are not killed). ``reservations`` is information only, never to be
    applied: waiting requests and the placement being held for them (the slots no later request
    may take this round), e.g. for the job queue's display. The next round decides afresh.
    """

    assignments: Mapping[str, Placement] = field(default_factory=dict)
    preemptions: tuple[str, ...] = ()
    reservations: Mapping[str, Placement] = field(default_factory=dict)
