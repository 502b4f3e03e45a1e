"""Routes: what a running task asks about its own allocation (wire doc 5.4, 5.5).

Every route here requires the caller to own the allocation: a task's allocation token only
opens its own allocation (403 otherwise); users need to own the task or be an admin.

The preemption long-poll is ``async``: it authenticates, releases its database session, and
waits on the notifier (re-reading the flag at least every second) without holding a connection.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, cast

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from stalwart.errors import NotFoundError
from stalwart.master.api.deps import Caller, CallerDep, SessionDep, StateDep, long_poll
from stalwart.master.api.models.agents import (
    AllGatherRequest,
    AllGatherResponse,
    AllocationReadyRequest,
    NotifyContainerRunningRequest,
    PostAcceleratorDataRequest,
    PreemptionSignalResponse,
    RendezvousInfoResponse,
    V1RendezvousInfo,
)
from stalwart.master.api.models.common import Empty
from stalwart.master.db.tables import Allocation
from stalwart.master.services import allocations as alloc_service
from stalwart.master.services import interactive
from stalwart.master.state import MasterState, allocation_key
from stalwart.master.transitions import ALLOCATION_STATES, set_allocation_state

__all__ = ["router"]

router = APIRouter(tags=["allocations"])

MAX_LONG_POLL_S = 600
"""Longest preemption long-poll the master honours (the harness asks for 60 s)."""
RECHECK_S = 1.0
"""How often a long-poll re-reads the flag even without a notification."""
ALL_GATHER_TIMEOUT_S = 600.0
"""How long an all-gather waits for its peers before failing."""


def _authorize(session: Any, allocation_id: str, caller: Caller) -> Allocation:
    return alloc_service.authorize_allocation(
        session, allocation_id, user=caller.user, caller_allocation_id=caller.allocation_id
    )


def _all_gather(request: Request) -> alloc_service.AllGather:
    holder = request.app.state
    gather = getattr(holder, "stalwart_all_gather", None)
    if gather is None:
        gather = alloc_service.AllGather()
        holder.stalwart_all_gather = gather
    return cast(alloc_service.AllGather, gather)


@router.post("/allocations/{allocation_id}/acceleratorData", response_model=Empty)
def post_accelerator_data(
    allocation_id: str, body: PostAcceleratorDataRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """Store what ``prep_container`` found about the task's accelerators."""
    _authorize(session, allocation_id, caller)
    data = body.accelerator_data.model_copy(update={"allocation_id": allocation_id})
    alloc_service.set_accelerator_data(
        session, allocation_id, data.model_dump(mode="json", by_alias=True)
    )
    session.commit()
    return Empty()


@router.get(
    "/allocations/{allocation_id}/resources/{resources_id}/rendezvous",
    response_model=RendezvousInfoResponse,
)
def get_rendezvous_info(
    allocation_id: str, resources_id: str, caller: CallerDep, session: SessionDep
) -> RendezvousInfoResponse:
    """Addresses and slot counts of the allocation's containers, and the caller's rank."""
    allocation = _authorize(session, allocation_id, caller)
    info = alloc_service.rendezvous_info(session, allocation, resources_id)
    return RendezvousInfoResponse(
        rendezvous_info=V1RendezvousInfo(addresses=info.addresses, rank=info.rank, slots=info.slots)
    )


def _read_flag(state: MasterState, allocation_id: str) -> bool:
    with state.sessions() as session:
        return alloc_service.preemption_requested(session, allocation_id)


@router.get(
    "/allocations/{allocation_id}/signals/preemption", response_model=PreemptionSignalResponse
)
async def get_preemption_signal(
    request: Request,
    allocation_id: str,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    timeout_seconds: Annotated[int | None, Query()] = None,
    timeout_camel: Annotated[int | None, Query(alias="timeoutSeconds")] = None,
) -> PreemptionSignalResponse:
    """Long poll: ``{"preempt": true}`` at once if preemption was requested (or the allocation
    is being killed), else wait up to ``timeout_seconds`` (capped at MAX_LONG_POLL_S) for it and
    answer the current value."""

    def check() -> bool:
        try:
            return alloc_service.should_preempt(_authorize(session, allocation_id, caller))
        finally:
            session.close()

    if await run_in_threadpool(check):
        return PreemptionSignalResponse(preempt=True)
    wanted = timeout_seconds if timeout_seconds is not None else timeout_camel
    deadline = time.monotonic() + min(max(wanted or 0, 0), MAX_LONG_POLL_S)
    key = allocation_key(allocation_id)
    while (remaining := deadline - time.monotonic()) > 0 and not state.notifier.closed:
        await long_poll(request, state.notifier, [key], min(remaining, RECHECK_S))
        if await run_in_threadpool(_read_flag, state, allocation_id):
            return PreemptionSignalResponse(preempt=True)
        if await request.is_disconnected():
            break
    return PreemptionSignalResponse(preempt=False)


@router.post("/allocations/{allocation_id}/signals/ack_preemption", response_model=Empty)
def ack_preemption(allocation_id: str, caller: CallerDep, session: SessionDep) -> Empty:
    """The task saw the preemption signal: its coming exit is a preemption, not the end."""
    _authorize(session, allocation_id, caller)
    alloc_service.ack_preemption(session, allocation_id)
    session.commit()
    return Empty()


@router.post("/allocations/{allocation_id}/signals/pending_preemption", response_model=Empty)
def pending_preemption(
    allocation_id: str, caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """Slurm told the task it will be preempted (SIGTERM): ask it to checkpoint and exit."""
    _authorize(session, allocation_id, caller)
    changed = alloc_service.request_preemption(session, allocation_id)
    session.commit()
    if changed:
        state.notifier.notify(allocation_key(allocation_id))
    return Empty()


@router.post("/allocations/{allocation_id}/all_gather", response_model=AllGatherResponse)
async def all_gather(
    allocation_id: str,
    body: AllGatherRequest,
    request: Request,
    caller: CallerDep,
    session: SessionDep,
) -> AllGatherResponse:
    """Wait until ``numPeers`` participants posted, then answer all their data (in the order
    they arrived). Used by the Slurm and Kubernetes rendezvous of ``prep_container``."""

    def check() -> None:
        try:
            _authorize(session, allocation_id, caller)
        finally:
            session.close()

    await run_in_threadpool(check)
    data = await _all_gather(request).gather(
        f"all_gather:{allocation_id}",
        body.request_uuid,
        body.num_peers,
        body.data,
        timeout=ALL_GATHER_TIMEOUT_S,
    )
    return AllGatherResponse(data=data)


def _mark_running(state: MasterState, allocation_id: str) -> None:
    with state.sessions() as session:
        allocation = alloc_service.get_allocation(session, allocation_id)
        if ALLOCATION_STATES.index(allocation.state) < ALLOCATION_STATES.index("RUNNING"):
            set_allocation_state(session, allocation, "RUNNING")
            session.commit()


@router.post(
    "/allocations/{allocation_id}/notify_container_running", response_model=AllGatherResponse
)
async def notify_container_running(
    allocation_id: str,
    body: NotifyContainerRunningRequest,
    request: Request,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> AllGatherResponse:
    """One container of the allocation runs (HPC launchers); once all ``numPeers`` have said
    so the allocation becomes RUNNING, and every caller gets the gathered data."""

    def check() -> None:
        try:
            _authorize(session, allocation_id, caller)
        finally:
            session.close()

    await run_in_threadpool(check)
    data = await _all_gather(request).gather(
        f"running:{allocation_id}",
        body.request_uuid,
        body.num_peers,
        body.data,
        timeout=ALL_GATHER_TIMEOUT_S,
    )
    await run_in_threadpool(_mark_running, state, allocation_id)
    return AllGatherResponse(data=data)


@router.post("/allocations/{allocation_id}/proxy_address", response_model=Empty)
def post_proxy_address(allocation_id: str, caller: CallerDep, session: SessionDep) -> Empty:
    """Accepted and ignored: Stalwart does not proxy task ports yet."""
    _authorize(session, allocation_id, caller)
    return Empty()


@router.post("/allocations/{allocation_id}/ready", response_model=Empty)
def allocation_ready(
    allocation_id: str,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    body: AllocationReadyRequest | None = None,
) -> Empty:
    """The task's service answers (an interactive task's program, or the official
    ``check_ready_logs.py``): ``isReady``, and the proxy forwards to it."""
    allocation = _authorize(session, allocation_id, caller)
    os_user = body.stalwart_os_user if body is not None else None
    interactive.mark_ready(session, allocation, state.clock.now(), os_user)
    session.commit()
    return Empty()


@router.post("/allocations/{allocation_id}/waiting", response_model=Empty)
def allocation_waiting(allocation_id: str, caller: CallerDep, session: SessionDep) -> Empty:
    """The task's service runs but has nothing to show yet (a TensorBoard without event
    files); the task stays not ready."""
    _authorize(session, allocation_id, caller)
    return Empty()


@router.post("/allocations/{allocation_id}/resources/{resources_id}/daemon", response_model=Empty)
def mark_resources_daemon(
    allocation_id: str, resources_id: str, caller: CallerDep, session: SessionDep
) -> Empty:
    """Mark one container of an allocation as a daemon (``MarkAllocationResourcesDaemon``;
    the DeepSpeed launcher's non-chief sshd containers): on Determined, once every non-daemon
    container has exited, the daemons are killed and the allocation ends.

    An id that is not one of the allocation's containers is 404. Stalwart runs each allocation
    as exactly one container, and Determined ignores the request for an allocation with one
    set of resources (marking it would only kill it): the call succeeds and changes nothing.
    """
    allocation = _authorize(session, allocation_id, caller)
    containers = alloc_service.allocation_containers(session, allocation)
    if resources_id not in {c.container_id for c in containers}:
        raise NotFoundError(
            f"allocation {allocation_id} has no resources {resources_id} (its containers "
            "take their id from DET_RESOURCES_ID)"
        )
    return Empty()
