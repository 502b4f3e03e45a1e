"""Routes: agents and their slots (``det agent list``, ``det slot list``; wire doc 4.5), and the
resource pools they serve (``GET /api/v1/resource-pools``, read by ``det job list`` and the SDK)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.api.deps import Caller, CallerDep, SessionDep, StateDep, require_admin
from stalwart.master.api.models.agents import (
    DisableRequest,
    GetAgentResponse,
    GetAgentsResponse,
    GetResourcePoolsResponse,
    GetSlotResponse,
    GetSlotsResponse,
    PrioritySchedulerDetail,
    QueueStats,
    ResourcePoolDetail,
    V1Agent,
    V1ResourcePool,
)
from stalwart.master.api.models.common import paginate
from stalwart.master.api.wire.agents import agent_to_wire, slot_to_wire
from stalwart.master.db.tables import Agent, Allocation, Slot
from stalwart.master.rm.agent.placement import pool_settings
from stalwart.master.rm.base import EnginePools
from stalwart.master.services import agents as agent_service
from stalwart.master.services.pool_bindings import bound_pools

__all__ = ["router"]

router = APIRouter(tags=["agents"])

AdminDep = Annotated[Caller, Depends(require_admin)]


def _allocation_states(session: Session, slots: Iterable[Slot]) -> dict[str, str]:
    ids = {s.allocation_id for s in slots if s.allocation_id is not None}
    if not ids:
        return {}
    rows = session.execute(select(Allocation.id, Allocation.state).where(Allocation.id.in_(ids)))
    return {str(aid): str(state) for aid, state in rows}


def _wire_agents(
    session: Session,
    agents: list[Agent],
    *,
    exclude_slots: bool = False,
    exclude_containers: bool = False,
) -> list[V1Agent]:
    slots = agent_service.slots_of(session, [a.id for a in agents])
    states = _allocation_states(session, (s for held in slots.values() for s in held))
    return [
        agent_to_wire(
            agent,
            slots[agent.id],
            states,
            exclude_slots=exclude_slots,
            exclude_containers=exclude_containers,
        )
        for agent in agents
    ]


@router.get("/agents", response_model=GetAgentsResponse)
def get_agents(
    _caller: CallerDep,
    session: SessionDep,
    sort_by: Annotated[str | None, Query(alias="sortBy")] = None,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
    offset: int = 0,
    limit: int = 0,
    exclude_slots: Annotated[bool, Query(alias="excludeSlots")] = False,
    exclude_containers: Annotated[bool, Query(alias="excludeContainers")] = False,
) -> GetAgentsResponse:
    """Every agent with its slots (a map by slot id) and containers; paginated."""
    agents = agent_service.list_agents(session)
    if sort_by == "SORT_BY_TIME":
        agents.sort(key=lambda a: (a.registered_time, a.id))
    elif sort_by not in (None, "", "SORT_BY_UNSPECIFIED", "SORT_BY_ID"):
        raise InvalidArgumentError(f"unsupported sortBy {sort_by}")
    if order_by == "ORDER_BY_DESC":
        agents.reverse()
    start, end, pagination = paginate(len(agents), offset, limit)
    wire = _wire_agents(
        session,
        agents[start:end],
        exclude_slots=exclude_slots,
        exclude_containers=exclude_containers,
    )
    return GetAgentsResponse(agents=wire, pagination=pagination)


@router.get("/agents/{agent_id}", response_model=GetAgentResponse)
def get_agent(agent_id: str, _caller: CallerDep, session: SessionDep) -> GetAgentResponse:
    """One agent (404 if unknown)."""
    agent = agent_service.get_agent(session, agent_id)
    return GetAgentResponse(agent=_wire_agents(session, [agent])[0])


@router.get("/agents/{agent_id}/slots", response_model=GetSlotsResponse)
def get_slots(agent_id: str, _caller: CallerDep, session: SessionDep) -> GetSlotsResponse:
    """An agent's slots, as a list."""
    agent_service.get_agent(session, agent_id)
    slots = agent_service.slots_of(session, [agent_id])[agent_id]
    states = _allocation_states(session, slots)
    return GetSlotsResponse(slots=[slot_to_wire(s, states) for s in slots])


@router.get("/agents/{agent_id}/slots/{slot_id}", response_model=GetSlotResponse)
def get_slot(
    agent_id: str, slot_id: str, _caller: CallerDep, session: SessionDep
) -> GetSlotResponse:
    """One slot of an agent."""
    slot = session.get(Slot, (agent_id, slot_id))
    if slot is None:
        raise NotFoundError(f"slot {slot_id} of agent {agent_id} not found")
    return GetSlotResponse(slot=slot_to_wire(slot, _allocation_states(session, [slot])))


@router.post("/agents/{agent_id}/enable", response_model=GetAgentResponse)
def enable_agent(agent_id: str, _admin: AdminDep, session: SessionDep) -> GetAgentResponse:
    """Let the scheduler use the agent again (admin)."""
    agent = agent_service.set_agent_enabled(session, agent_id, enabled=True, drain=False)
    session.commit()
    return GetAgentResponse(agent=_wire_agents(session, [agent])[0])


@router.post("/agents/{agent_id}/disable", response_model=GetAgentResponse)
def disable_agent(
    agent_id: str, _admin: AdminDep, session: SessionDep, body: DisableRequest | None = None
) -> GetAgentResponse:
    """Stop scheduling on the agent (admin); ``drain`` lets running work finish.

    Only the flags change here; stopping what runs on a non-draining agent is the agent
    resource manager's job.
    """
    drain = bool(body and body.drain)
    agent = agent_service.set_agent_enabled(session, agent_id, enabled=False, drain=drain)
    session.commit()
    return GetAgentResponse(agent=_wire_agents(session, [agent])[0])


@router.post("/agents/{agent_id}/slots/{slot_id}/enable", response_model=GetSlotResponse)
def enable_slot(
    agent_id: str, slot_id: str, _admin: AdminDep, session: SessionDep
) -> GetSlotResponse:
    """Let the scheduler use the slot again (admin)."""
    slot = agent_service.set_slot_enabled(session, agent_id, slot_id, enabled=True, drain=False)
    session.commit()
    return GetSlotResponse(slot=slot_to_wire(slot, _allocation_states(session, [slot])))


@router.post("/agents/{agent_id}/slots/{slot_id}/disable", response_model=GetSlotResponse)
def disable_slot(
    agent_id: str,
    slot_id: str,
    _admin: AdminDep,
    session: SessionDep,
    body: DisableRequest | None = None,
) -> GetSlotResponse:
    """Stop scheduling on one slot (admin)."""
    drain = bool(body and body.drain)
    slot = agent_service.set_slot_enabled(session, agent_id, slot_id, enabled=False, drain=drain)
    session.commit()
    return GetSlotResponse(slot=slot_to_wire(slot, _allocation_states(session, [slot])))


_SLOT_TYPES = {"cuda": "TYPE_CUDA", "rocm": "TYPE_ROCM", "cpu": "TYPE_CPU"}


@router.get("/resource-pools", response_model=GetResourcePoolsResponse)
def get_resource_pools(
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    offset: int = 0,
    limit: int = 0,
    unbound: bool | None = None,
) -> GetResourcePoolsResponse:
    """Every resource pool (``default``, the master config's, then those only agents serve),
    with slot counts and types from the connected agents and each pool's scheduler; paginated.

    ``unbound``: only the pools bound to no workspace (``api/pool_bindings.py``). When the
    engine defines the pools (:class:`~stalwart.master.rm.base.EnginePools`: Slurm partitions,
    PBS queues) they are its pools (slots from ``sinfo``/``pbsnodes``, GPU types as
    ``accelerator``) and the scheduler is the engine's (``SCHEDULER_TYPE_SLURM``,
    ``SCHEDULER_TYPE_PBS``).
    """
    settings = state.settings
    schedulers = pool_settings(settings)
    engine = state.rm if isinstance(state.rm, EnginePools) else None
    pools = agent_service.resource_pools(session, settings.resource_pools)
    defaults = {"default"}
    accelerators: dict[str, str] = {}
    if engine is not None and (partitions := engine.engine_pools(session)):
        pools = [p.view for p in partitions]
        defaults = {p.view.name for p in partitions if p.default}
        accelerators = {
            p.view.name: ",".join(p.gpu_types)
            for p in partitions
            if p.gpu_types and p.view.slot_type != "cpu"
        }
    if unbound:
        bound = bound_pools(session)
        pools = [p for p in pools if p.name not in bound]
    start, end, pagination = paginate(len(pools), offset, limit)
    wire = []
    for pool in pools[start:end]:
        sched = schedulers.get(pool.name)
        kind = sched.scheduler if sched is not None else "priority"
        fitting = sched.fitting_policy if sched is not None else "best"
        detail = ResourcePoolDetail()
        if kind == "priority" and engine is None:
            detail.priority_scheduler = PrioritySchedulerDetail(
                preemption=bool(sched and sched.preemption)
            )
        wire.append(
            V1ResourcePool(
                name=pool.name,
                description=pool.description,
                num_agents=pool.num_agents,
                slots_available=pool.slots_available,
                slots_used=pool.slots_used,
                slot_type=_SLOT_TYPES[pool.slot_type],
                default_compute_pool=pool.name in defaults,
                default_aux_pool=pool.name in defaults,
                accelerator=accelerators.get(pool.name),
                slots_per_agent=pool.slots_per_agent,
                scheduler_type=f"SCHEDULER_TYPE_{engine.scheduler_type}"
                if engine is not None
                else f"SCHEDULER_TYPE_{kind.upper()}",
                scheduler_fitting_policy=f"FITTING_POLICY_{engine.scheduler_type}"
                if engine is not None
                else f"FITTING_POLICY_{fitting.upper()}",
                details=detail,
                cluster_name=settings.cluster_name,
                stats=QueueStats(queued_count=pool.queued, scheduled_count=pool.scheduled),
            )
        )
    return GetResourcePoolsResponse(resource_pools=wire, pagination=pagination)
