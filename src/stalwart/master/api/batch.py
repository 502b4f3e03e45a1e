"""Routes: the batch-job launcher's calls (``python -m stalwart.hpc.task``, on compute nodes
and in Kubernetes pods: the engines that are a :class:`~stalwart.master.rm.base.BatchLauncher`).

Only an allocation token opens them, and only for its own allocation (403 otherwise; users get
403 too: these calls speak for a running task).

- ``POST /allocations/{id}/batch/start`` ``{rank, node, address}``: records where the rank
  runs, then answers the rank's stored :class:`~stalwart.agent.protocol.TaskSpec`
  (``{"spec": ...}``), and the container and the allocation become RUNNING. With several nodes
  the spec's ``rendezvous.json`` lists every node's ``address`` (rank order), so it is only
  given once every rank has called; until then the answer is ``{"spec": null, "waiting":
  [ranks not heard from]}`` and the launcher calls again. An allocation being killed
  (TERMINATING, TERMINATED) answers ``{"spec": null, "message": ...}``: the launcher exits
  without running anything.
- ``POST /allocations/{id}/batch/exit`` ``{rank, exit_code, reason}``: the container exited
  (the first report wins; the engine's later word about the job changes nothing). The cluster
  loop is poked so that the allocation ends within a round, as on agents.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from stalwart.errors import ForbiddenError, NotFoundError
from stalwart.master.api.deps import Caller, CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import WireRequest
from stalwart.master.db.tables import Allocation, Container
from stalwart.master.rm import batchjobs
from stalwart.master.rm.base import BatchLauncher
from stalwart.master.services.allocations import STOPPING_STATES, get_allocation
from stalwart.master.state import MasterState

__all__ = ["router"]

router = APIRouter(tags=["batch"])


class BatchStartRequest(WireRequest):
    rank: int = Field(default=0, ge=0)
    node: str = ""
    address: str = Field(default="", description="The node's address as the other nodes reach it.")


class BatchExitRequest(WireRequest):
    rank: int = Field(default=0, ge=0)
    exit_code: int | None = None
    reason: str | None = None


def _own(session: Any, allocation_id: str, caller: Caller) -> Allocation:
    if caller.allocation_id != allocation_id:
        raise ForbiddenError(f"only allocation {allocation_id}'s own token may call this")
    return get_allocation(session, allocation_id)


def _launched(session: Any, state: MasterState, allocation_id: str, rank: int) -> Container:
    """Container ``rank`` of the allocation, run by this master's launching engine (404
    otherwise: an agent's containers, or a rank the allocation does not have)."""
    row: Container | None = session.get(Container, (allocation_id, rank))
    rm = state.rm
    if row is None or not isinstance(rm, BatchLauncher) or row.agent_id != rm.container_agent:
        raise NotFoundError(f"allocation {allocation_id} has no batch container {rank}")
    return row


@router.post("/allocations/{allocation_id}/batch/start")
def batch_start(
    allocation_id: str,
    body: BatchStartRequest,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> dict[str, Any]:
    """The rank's spec; the container runs (see the module docstring)."""
    allocation = _own(session, allocation_id, caller)
    row = _launched(session, state, allocation_id, body.rank)
    if allocation.state in STOPPING_STATES or row.state == "EXITED":
        return {"spec": None, "message": f"allocation {allocation_id} is being stopped"}
    batchjobs.record_node(session, allocation_id, body.rank, body.node, body.address)
    session.commit()
    spec, missing = batchjobs.rendezvous_spec(session, allocation_id, body.rank)
    if missing:
        return {"spec": None, "waiting": missing}
    with state.lifecycle:
        session.refresh(allocation)
        batchjobs.mark_running(session, allocation, body.rank)
        session.commit()
    return {"spec": spec}


@router.post("/allocations/{allocation_id}/batch/exit")
def batch_exit(
    allocation_id: str,
    body: BatchExitRequest,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> dict[str, Any]:
    """Record the rank's exit and poke the cluster loop."""
    _own(session, allocation_id, caller)
    _launched(session, state, allocation_id, body.rank)
    session.commit()  # read afresh under the lock
    with state.lifecycle:
        changed = batchjobs.mark_exited(
            session, allocation_id, body.exit_code, body.reason, [body.rank]
        )
        session.commit()
    if changed:
        state.hints.poke()
    return {}
