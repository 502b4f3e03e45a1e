"""Wire forms of agents, slots, tasks and allocations (the models are in ``api.models.agents``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stalwart.master.api.models.agents import (
    AgentTokenInfo,
    AllocationSummary,
    DeviceList,
    DeviceStats,
    ResourcesSummary,
    SlotStats,
    V1Agent,
    V1Allocation,
    V1Container,
    V1Device,
    V1Slot,
    V1Task,
)
from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.info import WIRE_VERSION
from stalwart.master.db.tables import Agent, AgentCredential, Allocation, Slot, Task
from stalwart.master.services.allocations import container_id
from stalwart.master.services.interactive import WIRE_TASK_STATES
from stalwart.master.transitions import LIVE_ALLOCATION_STATES

__all__ = [
    "agent_credential_to_wire",
    "agent_to_wire",
    "allocation_summary",
    "allocation_to_wire",
    "container_state",
    "slot_to_wire",
    "task_to_wire",
]

_DEVICE_TYPE = {"cpu": "TYPE_CPU", "cuda": "TYPE_CUDA", "rocm": "TYPE_ROCM"}
_CONTAINER_STATE = {
    "PENDING": "STATE_ASSIGNED",
    "WAITING": "STATE_ASSIGNED",
    "ASSIGNED": "STATE_ASSIGNED",
    "PULLING": "STATE_PULLING",
    "STARTING": "STATE_STARTING",
    "RUNNING": "STATE_RUNNING",
    "TERMINATING": "STATE_RUNNING",
    "TERMINATED": "STATE_TERMINATED",
}


def container_state(allocation_state: str) -> str:
    """``containerv1State`` of a container of an allocation in ``allocation_state``."""
    return _CONTAINER_STATE.get(allocation_state, "STATE_UNSPECIFIED")


# --- agents and slots ---------------------------------------------------------------------------


def _device(slot: Slot) -> V1Device:
    return V1Device(
        id=slot.device_index,
        brand=slot.device_brand,
        uuid=slot.device_uuid,
        type=_DEVICE_TYPE.get(slot.device_type, "TYPE_UNSPECIFIED"),
    )


def slot_to_wire(slot: Slot, allocation_states: Mapping[str, str]) -> V1Slot:
    """The wire form of a slot; ``allocation_states`` maps allocation ids to their states."""
    container = None
    if slot.allocation_id is not None:
        container = V1Container(
            id=container_id(slot.allocation_id),
            state=container_state(allocation_states.get(slot.allocation_id, "ASSIGNED")),
            parent=slot.agent_id,
            devices=[_device(slot)],
        )
    return V1Slot(
        id=slot.slot_id,
        device=_device(slot),
        enabled=slot.enabled,
        draining=slot.draining,
        container=container,
    )


def _stats(slots: Sequence[V1Slot]) -> SlotStats:
    stats = SlotStats()
    for slot in slots:
        device = slot.device or V1Device()
        for table, key in (
            (stats.type_stats, device.type or "TYPE_UNSPECIFIED"),
            (stats.brand_stats, device.brand or ""),
        ):
            entry = table.setdefault(key, DeviceStats())
            entry.total += 1
            entry.disabled += 0 if slot.enabled else 1
            entry.draining += 1 if slot.draining else 0
            if slot.container is not None:
                state = slot.container.state
                entry.states[state] = entry.states.get(state, 0) + 1
    return stats


def agent_to_wire(
    agent: Agent,
    slots: Sequence[Slot],
    allocation_states: Mapping[str, str],
    *,
    exclude_slots: bool = False,
    exclude_containers: bool = False,
) -> V1Agent:
    """The wire form of an agent and its slots."""
    wire_slots = [slot_to_wire(s, allocation_states) for s in slots]
    containers: dict[str, V1Container] = {}
    for slot in wire_slots:
        if slot.container is None:
            continue
        held = containers.get(slot.container.id)
        if held is None:
            containers[slot.container.id] = slot.container.model_copy(deep=True)
        else:
            held.devices.extend(slot.container.devices)
    return V1Agent(
        id=agent.id,
        slot_stats=_stats(wire_slots),
        registered_time=wire_time(agent.registered_time),
        slots=None if exclude_slots else {s.id or "": s for s in wire_slots},
        containers=None if exclude_containers else containers,
        resource_pools=[agent.resource_pool],
        addresses=[str(a) for a in agent.addresses or []],
        enabled=agent.enabled,
        draining=agent.draining,
        version=WIRE_VERSION,
        stalwart_version=agent.version,
    )


# --- tasks and allocations ----------------------------------------------------------------------


def allocation_summary(
    allocation: Allocation, task: Task | None, slots: Sequence[Slot], priority: int | None
) -> AllocationSummary:
    """The ``/api/v1/tasks`` entry of a live allocation and the slots it holds."""
    resources = None
    if slots:
        by_agent: dict[str, DeviceList] = {}
        for slot in slots:
            by_agent.setdefault(slot.agent_id, DeviceList()).devices.append(_device(slot))
        cid = container_id(allocation.id)
        resources = [
            ResourcesSummary(
                resources_id=cid,
                allocation_id=allocation.id,
                agent_devices=by_agent,
                container_id=cid,
            )
        ]
    return AllocationSummary(
        task_id=allocation.task_id,
        allocation_id=allocation.id,
        name=(task.name if task is not None and task.name else allocation.task_id),
        registered_time=wire_time(allocation.start_time),
        resource_pool=allocation.resource_pool,
        slots_needed=allocation.slots,
        resources=resources,
        priority=priority,
    )


SERVING_TASK_TYPES = frozenset({"NOTEBOOK", "SHELL", "TENSORBOARD"})
"""Task types whose allocation is ready only once its service says it answers."""


def allocation_to_wire(allocation: Allocation, *, serves: bool = False) -> V1Allocation:
    """The wire form of an allocation row. ``isReady``: a task that ``serves`` something
    (notebook, shell, TensorBoard) once it said so, any other once it runs."""
    running = allocation.state == "RUNNING"
    return V1Allocation(
        task_id=allocation.task_id,
        state=WIRE_TASK_STATES.get(allocation.state, "STATE_UNSPECIFIED"),
        allocation_id=allocation.id,
        slots=allocation.slots,
        is_ready=running and (allocation.is_ready or not serves),
        start_time=wire_time(allocation.start_time),
        end_time=wire_time(allocation.end_time),
        exit_reason=allocation.exit_reason,
        status_code=allocation.exit_code,
        image_pull_seconds=allocation.pull_seconds,
    )


def task_to_wire(task: Task, allocations: Sequence[Allocation]) -> V1Task:
    """The wire form of a task and its allocations."""
    state = None
    if (task.extra or {}).get("paused"):
        stopping = any(a.state in LIVE_ALLOCATION_STATES for a in allocations)
        state = f"GENERIC_TASK_STATE_{'STOPPING_PAUSED' if stopping else 'PAUSED'}"
    return V1Task(
        task_state=state,
        task_id=task.task_id,
        task_type=f"TASK_TYPE_{task.task_type}",
        allocations=[
            allocation_to_wire(a, serves=task.task_type in SERVING_TASK_TYPES) for a in allocations
        ],
        start_time=wire_time(task.start_time) or "",
        end_time=wire_time(task.end_time),
    )


def agent_credential_to_wire(row: AgentCredential) -> AgentTokenInfo:
    """An agent credential without its secret part (the token's hash never leaves the master)."""
    created = wire_time(row.created_at)
    assert created is not None
    return AgentTokenInfo(
        agent_id=row.agent_id,
        created_at=created,
        confirmed_at=wire_time(row.confirmed_at),
        revoked_at=wire_time(row.revoked_at),
    )
