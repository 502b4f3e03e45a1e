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

Before it, :func:`store_exit_reports` stores the metrics reports that came with new exits
(``ContainerStatus.reports``, from the task's spool), in the transaction that then records
the exits: a report already stored is left out, so one that both the task's post and its
exit delivered is stored once; reports naming another trial than the container's, or that the
metrics service refuses (a superseded run), are not stored, with a line in the task's log. So
the round that sees the exit sees them too (a searcher fed the exit has been fed the trial's
last validation).

It returns the response and whether anything changed that the cluster loop must look at (an
exit, or a new agent); the followers of tasks that got log lines are woken by the commit. With
``record=False`` it only recomputes steps 2-3's answer (for a long-poll that woke up), writing
nothing. Nothing here talks to the network.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart import handovers
from stalwart.agent.protocol import ContainerStatus, SyncRequest, SyncResponse, TaskSpec
from stalwart.errors import InvalidArgumentError, StalwartError
from stalwart.master.api.models.trials import ReportTrialMetricsRequest
from stalwart.master.cluster.lifecycle import master_log
from stalwart.master.db.tables import (
    LIVE_CONTAINER_STATES,
    Agent,
    Allocation,
    Container,
    Task,
    Trial,
)
from stalwart.master.services.agents import heartbeat, register_agent, report_digest
from stalwart.master.services.allocations import record_pull_time
from stalwart.master.services.logs import NewLog, add_logs
from stalwart.master.services.metrics import (
    MetricsInput,
    check_report,
    report_metrics_many,
    wire_input,
)
from stalwart.master.state import agent_key
from stalwart.master.transitions import set_allocation_state, set_container_state

__all__ = ["SyncOutcome", "agent_key", "apply_sync", "store_exit_reports"]

log = logging.getLogger(__name__)

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


def store_exit_reports(session: Session, agent_id: str, request: SyncRequest) -> None:
    """Store the metrics reports that came with the request's new exits (see the module
    docstring) in the caller's transaction, which :func:`apply_sync` then commits with the
    exits: the first writes of the session. Exits already recorded bring nothing (their
    reports were stored with them). Never raises: whatever goes wrong, the exits must still
    be recorded (a fault of the master's own is logged, and the reports are lost)."""
    pending = [c for c in request.containers if c.state == "EXITED" and c.reports]
    if not pending:
        return
    try:
        _store_exit_reports(session, agent_id, pending)
    except Exception:
        session.rollback()
        log.exception("storing the metrics reports sent with exits failed")


def _store_exit_reports(session: Session, agent_id: str, pending: list[ContainerStatus]) -> None:
    rows = {
        (row.allocation_id, row.rank): row
        for row in session.scalars(
            select(Container).where(
                Container.agent_id == agent_id,
                Container.allocation_id.in_({c.allocation_id for c in pending}),
            )
        )
    }
    tasks = {
        allocation_id: (task_id, trial_id)
        for allocation_id, task_id, trial_id in session.execute(
            select(Allocation.id, Task.task_id, Task.trial_id)
            .join(Task, Task.task_id == Allocation.task_id)
            .where(Allocation.id.in_({c.allocation_id for c in pending}))
        )
    }
    trials = {trial for _, trial in tasks.values() if trial is not None}
    found = session.execute(select(Trial.id, Trial.run_id).where(Trial.id.in_(trials)))
    runs: dict[int, int] = dict(found.all())
    inputs: list[MetricsInput] = []
    problems: list[tuple[str, str, str]] = []  # task, allocation, why
    for status in pending:
        row = rows.get((status.allocation_id, status.rank))
        owner = tasks.get(status.allocation_id)
        if row is None or row.state == "EXITED" or owner is None:
            continue
        task_id, trial_id = owner
        own, why = _own_reports(status, trial_id, runs.get(trial_id or 0))
        inputs += own
        problems += [(task_id, status.allocation_id, w) for w in why]
    if inputs:
        try:
            report_metrics_many(session, inputs, commit=False)
        except StalwartError as exc:  # refused after all (it rolled back)
            problems += [
                (owner[0], status.allocation_id, str(exc))
                for status in pending
                if (owner := tasks.get(status.allocation_id)) is not None
            ]
    for task_id, allocation_id, problem in problems:
        master_log(
            session,
            task_id,
            allocation_id,
            f"metrics reports sent with the exit not stored: {problem}",
        )


def _own_reports(
    status: ContainerStatus, trial_id: int | None, run_id: int | None
) -> tuple[list[MetricsInput], list[str]]:
    """The exit's reports of the container's own trial and its current run, and why the
    others are left out."""
    inputs: list[MetricsInput] = []
    problems: list[str] = []
    for item in status.reports:
        try:
            report = wire_input(ReportTrialMetricsRequest.model_validate(item))
            check_report(report)
        except ValidationError as exc:
            problems.append(f"an unreadable report ({exc.error_count()} problem(s))")
            continue
        except InvalidArgumentError as exc:
            problems.append(str(exc))
            continue
        if report.trial_id != trial_id:
            problems.append(f"a report names trial {report.trial_id}, not the task's own")
        elif report.run_id != run_id:
            problems.append(
                f"a report of run {report.run_id}, the trial is on run {run_id} (a stale "
                "process of an earlier run?)"
            )
        else:
            inputs.append(report)
    return inputs, problems
