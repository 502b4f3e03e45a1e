"""Routes: posting task logs, and streaming trial / task logs and their fields, and the
master's own log (wire doc 1.6, 4.4, 5.1).

Streams are HTTP/1.1 chunked NDJSON: one ``{"result": ...}`` object per line and one chunk
(flush) per line, never a blank line; an error after the stream started is one
``{"error": ...}`` line. Each streaming route validates its request with the request's session,
closes that session, and then reads the database in pages from worker threads, so a follower
holds no connection while it waits. The master's own log comes from its in-memory ring
(:mod:`stalwart.master.logring`), not from the database. Served trial and task lines have the
secrets of their experiment and the task's allocation tokens masked (:mod:`stalwart.master.redact`).

Posted lines must be text (a lone UTF-16 surrogate such as ``"\\ud800"`` is 400, naming the
line); a line longer than ``limits.max_log_line_bytes`` (UTF-8) is stored cut to that length
with a marker saying so, so one runaway line neither fills the database nor costs the other
lines of its batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from functools import partial
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import (
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    StalwartError,
)
from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.errors import status_of
from stalwart.master.api.models.common import Empty, WireModel
from stalwart.master.api.models.logs import (
    PostTaskLogsRequest,
    TaskLogIn,
    TaskLogsFieldsResponse,
    TrialLogsFieldsResponse,
    result_line,
    stream_error_line,
)
from stalwart.master.api.wire.logs import (
    master_log_to_wire,
    new_log,
    task_log_to_wire,
    trial_log_to_wire,
)
from stalwart.master.db.tables import Allocation, Container, Experiment, Task, Trial
from stalwart.master.logring import LogEntry, LogRing
from stalwart.master.redact import collect_secrets, redact_text
from stalwart.master.services import logs as service
from stalwart.master.state import MasterState

__all__ = [
    "LogFilterDep",
    "TaskLogFilterDep",
    "check_paging",
    "legacy_router",
    "line_text",
    "log_filter",
    "require_task",
    "router",
    "task_secrets",
    "trial_task_id",
]

router = APIRouter(tags=["logs"])
legacy_router = APIRouter(tags=["logs"])
"""``POST /task-logs``, outside ``/api/v1`` as on Determined."""

T = TypeVar("T")

StrList = Annotated[list[str] | None, Query()]

MASTER_LOGS_PAGE = 1_000
"""Most ring entries a master-log follower takes at once."""
MASTER_LOGS_RECHECK_S = 10.0
"""A follower's safety-net wake-up; new entries wake it at once."""


@router.post("/task/logs", response_model=Empty)
def post_task_logs(
    body: PostTaskLogsRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> Empty:
    """Store a batch of lines (``ship_logs.py``); over ``limits.max_log_batch`` lines is 413."""
    limit = state.settings.limits.max_log_batch
    if len(body.logs) > limit:
        raise PayloadTooLargeError(
            f"{len(body.logs)} log lines in one request is over the limit of {limit} "
            "(limits.max_log_batch)"
        )
    if caller.allocation_id is None:
        policy.require_change_tasks(session, caller.user, [e.task_id for e in body.logs])
    max_line = state.settings.limits.max_log_line_bytes
    lines = [new_log(entry) for entry in body.logs]
    for index, line in enumerate(lines):
        lines[index] = dataclasses.replace(line, log=line_text(index, line.log, max_line))
    service.ingest_logs(session, lines, caller_allocation_id=caller.allocation_id)
    session.commit()  # wakes the tasks' followers
    return Empty()


@legacy_router.post("/task-logs")
def post_task_logs_legacy(
    body: list[dict[str, Any]], caller: CallerDep, session: SessionDep, state: StateDep
) -> str:
    """Determined's legacy log shipping (``core._log_shipper``, the log sender of unmanaged
    trials): a bare JSON list of ``model.TaskLog`` objects (snake_case keys: ``task_id``,
    ``log``, ``timestamp``, ``level``, ``stdtype``, ``source``, ``allocation_id``,
    ``agent_id``, ``container_id``, ``rank_id`` or the unmanaged shipper's ``rank``, a string;
    others are ignored). Stored exactly as
    ``POST /api/v1/task/logs`` stores them, with the same limits and access rule; answers
    ``""`` as Determined does. An empty list stores nothing."""
    if not body:
        return ""
    try:
        entries = [TaskLogIn.model_validate(_with_rank_id(item)) for item in body]
    except ValidationError as exc:
        raise InvalidArgumentError(
            "each posted task log needs a task_id and a log (Determined's model.TaskLog): "
            + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        ) from None
    post_task_logs(PostTaskLogsRequest(logs=entries), caller, session, state)
    return ""


def _with_rank_id(item: dict[str, Any]) -> dict[str, Any]:
    """A legacy log entry with the SDK's ``rank`` (a string) as ``rank_id``."""
    rank = item.get("rank")
    if item.get("rank_id") is None and isinstance(rank, str) and rank.isdigit():
        return {**item, "rank_id": int(rank)}
    return item


def line_text(index: int, text: str, limit: int) -> str:
    """The line as stored: refused if it is not text, cut to ``limit`` bytes with a marker."""
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"logs[{index}].log: holds a lone UTF-16 surrogate ({text[exc.start]!r} at "
            f"character {exc.start}), which is not text; send the line as valid UTF-8"
        ) from None
    if len(encoded) <= limit:
        return text
    kept = encoded[:limit].decode("utf-8", "ignore")
    return (
        f"{kept}... [line truncated: {len(encoded)} bytes, over the master's limit of {limit} "
        "(limits.max_log_line_bytes)]\n"
    )


def log_filter(
    agent_ids: Annotated[list[str] | None, Query(alias="agentIds")] = None,
    container_ids: Annotated[list[str] | None, Query(alias="containerIds")] = None,
    rank_ids: Annotated[list[int] | None, Query(alias="rankIds")] = None,
    sources: StrList = None,
    stdtypes: StrList = None,
    levels: StrList = None,
    timestamp_before: Annotated[str | None, Query(alias="timestampBefore")] = None,
    timestamp_after: Annotated[str | None, Query(alias="timestampAfter")] = None,
    search_text: Annotated[str | None, Query(alias="searchText")] = None,
) -> service.LogFilter:
    """The service's filter from a log read's query parameters (a dependency of every log route:
    Determined's ``TrialLogs`` fields; levels with or without ``LOG_LEVEL_``; times in RFC
    3339); InvalidArgumentError names a bad one."""
    return service.LogFilter(
        agent_ids=agent_ids or (),
        container_ids=container_ids or (),
        rank_ids=rank_ids or (),
        sources=sources or (),
        stdtypes=stdtypes or (),
        levels=[service.normalize_level(level) for level in levels or ()],
        timestamp_before=service.parse_timestamp(timestamp_before, what="timestampBefore"),
        timestamp_after=service.parse_timestamp(timestamp_after, what="timestampAfter"),
        search_text=search_text or "",
    )


LogFilterDep = Annotated[service.LogFilter, Depends(log_filter)]
"""A trial log read's filters."""


def task_log_filter(
    common: LogFilterDep,
    allocation_ids: Annotated[list[str] | None, Query(alias="allocationIds")] = None,
) -> service.LogFilter:
    """A task log read's filters: a trial's plus ``allocationIds`` (``TaskLogs``)."""
    return dataclasses.replace(common, allocation_ids=tuple(allocation_ids or ()))


TaskLogFilterDep = Annotated[service.LogFilter, Depends(task_log_filter)]
"""A task log read's filters."""


def check_paging(limit: int, follow: bool, order_by: str | None, enable_regex: bool) -> bool:
    """Whether the lines go newest first (``orderBy=ORDER_BY_DESC``); InvalidArgumentError
    for a negative ``limit``, ``limit`` with ``follow``, ``enableRegex`` or another order."""
    if limit < 0:
        raise InvalidArgumentError("limit must not be negative")
    if follow and limit > 0:
        raise InvalidArgumentError("give either limit or follow, not both")
    if enable_regex:
        raise InvalidArgumentError("enableRegex is not supported; searchText matches substrings")
    if order_by not in (None, "", "ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise InvalidArgumentError(f"unsupported orderBy {order_by}")
    return order_by == "ORDER_BY_DESC"


_STOPPING = "the master is stopping; follow again once it is back"


async def _ndjson(
    items: AsyncGenerator[T, None],
    render: Callable[[T], WireModel],
    cut: Callable[[], bool] = lambda: False,
) -> AsyncIterator[bytes]:
    """The NDJSON lines of ``items``; a follow the master's stop ended (``cut()`` once the items
    end) gets a last in-band 503 line, so the reader knows it was cut, not complete."""
    async with aclosing(items) as stream:
        try:
            async for item in stream:
                yield result_line(render(item))
            if cut():
                yield stream_error_line(503, 14, _STOPPING)
        except StalwartError as exc:
            http, grpc, _ = status_of(exc)
            yield stream_error_line(http, grpc, str(exc))
        except Exception as exc:  # the stream has started: report in-band, then end
            yield stream_error_line(500, 13, f"internal error: {exc}")


def _stream(body: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(body, media_type="application/json")


def trial_task_id(session: Session, trial_id: int) -> str:
    """The task of trial ``trial_id`` (NotFoundError if there is no such trial)."""
    trial = session.get(Trial, trial_id)
    if trial is None:
        raise NotFoundError(f"trial {trial_id} not found")
    return trial.task_id


def require_task(session: Session, task_id: str) -> None:
    """NotFoundError unless task ``task_id`` exists."""
    if session.get(Task, task_id) is None:
        raise NotFoundError(f"task {task_id} not found")


def _logs_response(
    state: MasterState,
    task_id: str,
    flt: service.LogFilter,
    *,
    limit: int,
    descending: bool,
    follow: bool,
    is_terminal: Callable[[Session], bool],
    render: Callable[[service.LogRecord], WireModel],
) -> StreamingResponse:
    records = service.stream_logs(
        state.sessions,
        state.notifier,
        task_id,
        flt,
        is_terminal=is_terminal,
        limit=limit,
        descending=descending,
        follow=follow,
    )
    secrets = task_secrets(state, task_id)
    if secrets:
        plain = render

        def render(record: service.LogRecord) -> WireModel:
            return plain(dataclasses.replace(record, log=redact_text(record.log, secrets)))

    return _stream(_ndjson(records, render, lambda: follow and state.notifier.closed))


def task_secrets(state: MasterState, task_id: str) -> list[str]:
    """What must not appear in the task's served log lines (:mod:`stalwart.master.redact`):
    the secrets of its experiment's config, its allocations' tokens and the cluster's agent
    (enrollment) token, should a task have printed it."""
    with state.sessions() as session:
        task = session.get(Task, task_id)
        experiment = (
            session.get(Experiment, task.experiment_id)
            if task is not None and task.experiment_id is not None
            else None
        )
        found = collect_secrets(experiment.config) if experiment is not None else []
        specs = session.scalars(
            select(Container.spec)
            .join(Allocation, Allocation.id == Container.allocation_id)
            .where(Allocation.task_id == task_id)
        )
        tokens = {spec.get("token") for spec in specs if isinstance(spec, dict)}
    found.extend(t for t in tokens if isinstance(t, str) and t)
    if state.agent_token:
        found.append(state.agent_token)
    return sorted(set(found), key=len, reverse=True)


@router.get("/trials/{trial_id}/logs")
def trial_logs(
    trial_id: int,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    flt: LogFilterDep,
    follow: bool = False,
    limit: int = 0,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
    enable_regex: Annotated[bool, Query(alias="enableRegex")] = False,
) -> StreamingResponse:
    """Stream a trial's logs (``det trial logs``): head (``limit``), tail (``limit`` +
    ``orderBy=ORDER_BY_DESC``: newest first), filters, and ``follow`` until the trial ends."""
    descending = check_paging(limit, follow, order_by, enable_regex)
    try:
        task_id = trial_task_id(session, trial_id)
    finally:
        session.close()
    return _logs_response(
        state,
        task_id,
        flt,
        limit=limit,
        descending=descending,
        follow=follow,
        is_terminal=partial(service.trial_terminal, trial_id=trial_id),
        render=partial(trial_log_to_wire, trial_id=trial_id),
    )


@router.get("/tasks/{task_id}/logs")
def task_logs(
    task_id: str,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    flt: TaskLogFilterDep,
    follow: bool = False,
    limit: int = 0,
    order_by: Annotated[str | None, Query(alias="orderBy")] = None,
    enable_regex: Annotated[bool, Query(alias="enableRegex")] = False,
) -> StreamingResponse:
    """Stream a task's logs (``det task logs``), as for trials plus ``allocationIds``."""
    descending = check_paging(limit, follow, order_by, enable_regex)
    try:
        require_task(session, task_id)
    finally:
        session.close()
    return _logs_response(
        state,
        task_id,
        flt,
        limit=limit,
        descending=descending,
        follow=follow,
        is_terminal=partial(service.task_terminal, task_id=task_id),
        render=task_log_to_wire,
    )


@router.get("/trials/{trial_id}/logs/fields")
def trial_logs_fields(
    trial_id: int, _caller: CallerDep, session: SessionDep, state: StateDep, follow: bool = False
) -> StreamingResponse:
    """Stream the distinct agent, container, rank, stdtype and source values of a trial's
    logs; with ``follow``, again whenever they change, until the trial ends."""
    try:
        task_id = trial_task_id(session, trial_id)
    finally:
        session.close()
    fields = service.stream_fields(
        state.sessions,
        state.notifier,
        task_id,
        is_terminal=partial(service.trial_terminal, trial_id=trial_id),
        follow=follow,
    )
    cut = lambda: follow and state.notifier.closed  # noqa: E731
    return _stream(_ndjson(fields, TrialLogsFieldsResponse.model_validate, cut))


@router.get("/tasks/{task_id}/logs/fields")
def task_logs_fields(
    task_id: str, _caller: CallerDep, session: SessionDep, state: StateDep, follow: bool = False
) -> StreamingResponse:
    """As the trial variant, plus the distinct allocation ids."""
    try:
        require_task(session, task_id)
    finally:
        session.close()
    fields = service.stream_fields(
        state.sessions,
        state.notifier,
        task_id,
        is_terminal=partial(service.task_terminal, task_id=task_id),
        follow=follow,
    )
    cut = lambda: follow and state.notifier.closed  # noqa: E731
    return _stream(_ndjson(fields, TaskLogsFieldsResponse.model_validate, cut))


async def _master_log_entries(
    ring: LogRing, offset: int, limit: int, follow: bool
) -> AsyncGenerator[LogEntry, None]:
    """The ring's entries by ``offset`` / ``limit``; then, with ``follow``, every new one
    until ``limit`` entries went out (0: until the client leaves or the master stops)."""
    entries = ring.read(offset, limit)
    for entry in entries:
        yield entry
    sent = len(entries)
    cursor = entries[-1].id if entries else max(offset, 0)
    while follow and (limit == 0 or sent < limit) and not ring.followers_stopped:
        batch = ring.after(
            cursor, MASTER_LOGS_PAGE if limit == 0 else min(MASTER_LOGS_PAGE, limit - sent)
        )
        if not batch:
            await ring.wait_after(cursor, MASTER_LOGS_RECHECK_S)
            continue
        for entry in batch:
            yield entry
        cursor, sent = batch[-1].id, sent + len(batch)


@router.get("/master/logs")
def master_logs(
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
    offset: int = 0,
    limit: int = 0,
    follow: bool = False,
) -> StreamingResponse:
    """Stream the master's own recent log records (``det master logs``), oldest first.

    ``offset`` skips that many records from the first the master logged; a negative one keeps
    the last ``-offset`` (``--tail``). ``limit``: at most that many (0 = all). ``follow``: then
    every new record, until ``limit`` is reached, the client leaves or the master stops.
    """
    session.close()  # authenticated; the ring is in memory
    if limit < 0:
        raise InvalidArgumentError("limit must not be negative")
    entries = _master_log_entries(state.log_ring, offset, limit, follow)
    ring = state.log_ring
    return _stream(_ndjson(entries, master_log_to_wire, lambda: follow and ring.followers_stopped))
