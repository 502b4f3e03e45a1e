"""The master's side of an agent sync (protocol in :mod:`stalwart.agent.protocol`).

:func:`apply_sync` runs in one short transaction and commits:

1. the agent is registered (idempotent) and heartbeats; its slots are refreshed;
2. each reported container is matched with its :class:`~stalwart.master.db.tables.Container`
   row: a running one moves the row (and its allocation) to RUNNING; an exited one is recorded
   (state EXITED, exit code, and the last log lines sent with the exit, in the same
   transaction, only when the exit is new) and listed in ``forget``; one the master does not
   know, or whose
   allocation has ended or is being killed, is listed in ``kill`` (and forgotten once exited);
3. every container placed on this agent and not reported is sent as a ``start`` (its stored
   spec), unless its allocation is being killed, in which case it is recorded as exited without
   ever starting; one that was RUNNING and is no longer reported (the agent restarted, or lost
   the process) is recorded as exited with no code (lost), which frees its slots.

It returns the response and whether anything changed that the cluster loop must look at (an
exit, or a new agent); the followers of tasks that got log lines are woken by the commit. With
``record=False`` it only recomputes steps 2-3's answer (for a long-poll that woke up), writing
nothing. Nothing here talks to the network.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart import handovers
from stalwart.agent.protocol import ContainerStatus, SyncRequest, SyncResponse, TaskSpec
from stalwart.master.db.tables import (
    LIVE_CONTAINER_STATES,
    Agent,
    Allocation,
    Container,
)
from stalwart.master.services.agents import heartbeat, register_agent, report_digest
from stalwart.master.services.allocations import record_pull_time
from stalwart.master.services.logs import NewLog, add_logs
from stalwart.master.state import agent_key
from stalwart.master.transitions import set_allocation_state, set_container_state

__all__ = ["SyncOutcome", "agent_key", "apply_sync"]

_KILLING = frozenset({"TERMINATING", "TERMINATED"})


@dataclass(frozen=True)
class SyncOutcome:
    """The answer, and whether the cluster loop has something new to look at."""

    response: SyncResponse
    changed: bool

    @property
    def has_work(self) -> bool:
        r = self.response
        return bool(r.start or r.kill or r.forget)


def apply_sync(
    session: Session,
    agent_id: str,
    request: SyncRequest,
    *,
    kill_grace: float,
    record: bool = True,
    prepull: Sequence[str] = (),
    now: dt.datetime | None = None,
) -> SyncOutcome:
    """Record the agent's view and answer it (see the module docstring); commits.

    ``prepull`` (the agent pool's pre-pull plan) travels in the answer as is. A container's
    reported ``pull_seconds`` is stored on its allocation. ``now``: the heartbeat's time (the
    master's clock; default the current time).

    A sync that repeats the report its connected agent registered with (the digest stored on
    the agent) only heartbeats. ``record=False`` only answers: it
    writes nothing (no registration, no state changes, no commit), for a long-poll answering
    again after it woke up; the same view was recorded moments before, and a container that
    must be recorded as never started is left to the agent's next sync.
    """
    known = session.get(Agent, agent_id)
    changed = record and (known is None or not known.connected)
    slots = [(s.id, s.device_type, s.brand, s.uuid) for s in request.slots]
    # Only a recorded sync from a connected agent compares its report (the digest costs a hash).
    registered = None if not record or changed or known is None else known.registered_report
    if registered is not None and registered == report_digest(
        request.version, request.resource_pool, request.addresses, slots
    ):
        heartbeat(session, agent_id, now=now)  # the report it registered with, repeated
    elif record:
        register_agent(
            session,
            agent_id,
            slots=slots,
            resource_pool=request.resource_pool,
            addresses=request.addresses,
            version=request.version,
            now=now,
        )
    # Only what matters: the agent's live containers and the ones it reports (the exited
    # history of a busy agent grows without bound; both queries use an index).
    reported_ids = sorted({c.allocation_id for c in request.containers})
    live = select(Container).where(
        Container.agent_id == agent_id, Container.state.in_(LIVE_CONTAINER_STATES)
    )
    rows = {(c.allocation_id, c.rank): c for c in session.scalars(live)}
    loaded = {allocation_id for allocation_id, _ in rows}
    if unseen := [a for a in reported_ids if a not in loaded]:  # exited, or unknown
        mentioned = select(Container).where(
            Container.allocation_id.in_(unseen), Container.agent_id == agent_id
        )
        rows.update({(c.allocation_id, c.rank): c for c in session.scalars(mentioned)})
    allocations = {
        a.id: a
        for a in session.scalars(
            select(Allocation).where(Allocation.id.in_({key[0] for key in rows}))
        )
    }
    kill: set[str] = set()
    forget: list[str] = []
    reported: set[tuple[str, int]] = set()
    for status in request.containers:
        key = (status.allocation_id, status.rank)
        reported.add(key)
        row = rows.get(key)
        allocation = allocations.get(status.allocation_id)
        if record and allocation is not None and row is not None:
            record_pull_time(allocation, status.pull_seconds)
        if status.state == "EXITED":
            if record and row is not None and row.state != "EXITED":
                set_container_state(
                    session, row, "EXITED", exit_code=status.exit_code, reason=status.exit_reason
                )
                handovers.mark("master.exit_recorded", [status.allocation_id])
                changed = True
                if status.logs and allocation is not None:
                    _store_last_lines(session, agent_id, allocation, status)
            forget.append(f"{status.allocation_id}/{status.rank}")
            continue
        if row is None or row.state == "EXITED" or allocation is None:
            kill.add(status.allocation_id)
            continue
        if allocation.state in _KILLING:
            kill.add(status.allocation_id)
        if not record:
            continue
        if status.state == "RUNNING" and row.state in ("ASSIGNED", "STARTING"):
            set_container_state(session, row, "RUNNING")
            if allocation.state in ("ASSIGNED", "PULLING", "STARTING"):
                set_allocation_state(session, allocation, "RUNNING")
        elif status.state == "STARTING" and row.state == "ASSIGNED":
            set_container_state(session, row, "STARTING")
            if allocation.state == "ASSIGNED":
                set_allocation_state(session, allocation, "STARTING")
    start: list[TaskSpec] = []
    for key, row in rows.items():
        if key in reported:
            continue
        if row.state == "RUNNING":
            # It ran here and the agent no longer has it (it restarted, or lost the process):
            # lost, so its allocation ends and its slots are freed.
            if record:
                reason = f"agent {agent_id} no longer runs it (the agent restarted or lost it)"
                set_container_state(session, row, "EXITED", reason=reason)
                changed = True
            continue
        allocation = allocations.get(row.allocation_id)
        if allocation is None or allocation.state in _KILLING:
            if not record:
                continue
            set_container_state(session, row, "EXITED", reason="killed before it started")
            changed = True
            continue
        start.append(TaskSpec.model_validate(row.spec))
        handovers.mark("master.start_sent", [row.allocation_id])
    if record:
        session.commit()
    response = SyncResponse(
        start=start,
        kill=sorted(kill),
        forget=forget,
        kill_grace_seconds=kill_grace,
        prepull=list(prepull),
    )
    return SyncOutcome(response=response, changed=changed)


def _store_last_lines(
    session: Session, agent_id: str, allocation: Allocation, status: ContainerStatus
) -> None:
    """Store the lines sent with an exit, as the container's (whatever the lines claim)."""
    add_logs(
        session,
        [
            NewLog(
                task_id=allocation.task_id,
                allocation_id=allocation.id,
                agent_id=agent_id,
                log=line.log,
                timestamp=line.timestamp,
                level=line.level,
                container_id=line.container_id,
                rank_id=line.rank_id,
                source=line.source,
                stdtype=line.stdtype,
            )
            for line in status.logs
        ],
    )
