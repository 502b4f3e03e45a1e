"""The scheduler's policies, as pure functions: a :class:`Snapshot` in, a :class:`Decision` out.

No database, no I/O, no clock. The scheduling loop (``docs/contributing/scheduler.md``) reads a
snapshot, calls :func:`schedule`, talks to agents and applies the decision through
:mod:`stalwart.master.transitions`.

- :mod:`.snapshot`: the values (agents, slots, requests, group limits, pool settings, decision)
- :mod:`.fitting`: gang fitting (best / worst fit, whole-agent multi-node fits)
- :mod:`.priority`: the priority scheduler, with preemption and reservation backfilling
- :mod:`.fair_share`: the fair-share scheduler (weighted max-min fairness between groups)
"""

from stalwart.master.scheduler.dispatch import schedule
from stalwart.master.scheduler.snapshot import (
    DEFAULT_MAX_AUX_CONTAINERS_PER_AGENT,
    DEFAULT_PRIORITY,
    MAX_PRIORITY,
    MIN_PRIORITY,
    AgentView,
    Decision,
    DeviceType,
    FittingPolicy,
    GroupLimits,
    Placement,
    PoolSettings,
    Request,
    SchedulerType,
    SlotView,
    Snapshot,
    placement_slots,
    queue_key,
    queue_order,
)

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
    "schedule",
]
