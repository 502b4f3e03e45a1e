"""Task logs: ingesting batches, reading pages with filters, and following a task's output.

Contracts:

- :func:`ingest_logs` and :func:`add_logs` add lines and note their tasks on the session
  (:func:`note_new_lines`); once the caller commits, the hook :func:`install_log_wakeups`
  installed on the master's session factory wakes those tasks' followers
  (``task_logs_key(task_id)``). Nobody notifies by hand, and a rolled-back line wakes no one. A
  task (allocation token) may only post
  its own task's lines (ForbiddenError); an unknown task is NotFoundError.
- Lines are ordered by their id (arrival order). :func:`fetch_page` reads one page after (or,
  newest first, before) an id; nothing ever loads a task's whole log.
- :func:`stream_logs` is an async generator for the event loop: every database read runs in a
  worker thread with its own short session, so no connection is held between pages or while
  waiting. With ``follow`` it keeps reading new lines, waking on the notifier and re-checking at
  least every ``recheck`` seconds, and ends once ``is_terminal`` says the task is done and the
  lines that were there at that moment have been sent.
- ``search_text`` matches a case-sensitive, literal substring of the line (Determined's
  ``searchText``), tested by the database (:class:`contains_text`), never in Python.
- Levels are stored without the ``LOG_LEVEL_`` prefix (``INFO``...), or NULL when the line had
  none; rank filter ``-1`` selects lines without a rank (Determined's convention).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from sqlalchemy import Boolean, ColumnElement, event, literal, or_, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from stalwart.errors import ForbiddenError, InvalidArgumentError, NotFoundError
from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Allocation, Task, TaskLog, Trial, utcnow
from stalwart.master.services import log_policies
from stalwart.master.services.webhook_events import scan_logs
from stalwart.master.state import Notifier, task_logs_key
from stalwart.master.transitions import TRIAL_TERMINAL

__all__ = [
    "LEVELS",
    "LogFilter",
    "LogRecord",
    "NewLog",
    "add_logs",
    "fetch_page",
    "format_message",
    "ingest_logs",
    "install_log_wakeups",
    "log_fields",
    "normalize_level",
    "note_new_lines",
    "parse_timestamp",
    "stream_fields",
    "stream_logs",
    "task_terminal",
    "trial_terminal",
]

_NEW_LINES_KEY = "log_tasks"
"""``session.info`` key of the tasks that got log lines in the session's transaction."""


def note_new_lines(session: Session, task_id: str) -> None:
    """``task_id`` got log lines (or ended) in this transaction: its followers are woken after
    the commit."""
    session.info.setdefault(_NEW_LINES_KEY, set()).add(task_id)


def install_log_wakeups(session_factory: Callable[..., Session], notifier: Notifier) -> None:
    """After each commit of a session made by ``session_factory``, notify
    ``task_logs_key(task)`` for every task noted by :func:`note_new_lines`; a rollback forgets
    them. Installed once by the master's ``open_state``."""

    @event.listens_for(session_factory, "after_commit")
    def _wake(session: Session) -> None:
        for task_id in sorted(session.info.pop(_NEW_LINES_KEY, ())):
            notifier.notify(task_logs_key(task_id))

    @event.listens_for(session_factory, "after_rollback")
    def _forget(session: Session) -> None:
        session.info.pop(_NEW_LINES_KEY, None)


LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL"}
PAGE_SIZE = 1000
_CONTAINER_WIDTH = 8


def normalize_level(value: str | None) -> str | None:
    """``INFO`` from ``LOG_LEVEL_INFO``, ``INFO`` or ``info``; None for no / unspecified level."""
    if value is None:
        return None
    name = value.strip().upper().removeprefix("LOG_LEVEL_")
    if name in ("", "UNSPECIFIED"):
        return None
    name = _ALIASES.get(name, name)
    if name not in LEVELS:
        raise InvalidArgumentError(f"unknown log level {value!r}")
    return name


def parse_timestamp(value: str | None, *, what: str = "timestamp") -> dt.datetime | None:
    """An RFC 3339 / ISO 8601 time (naive means UTC); None stays None."""
    if value is None or value == "":
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidArgumentError(f"invalid {what} {value!r}: {exc}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class NewLog:
    """One line as a task posts it (``v1TaskLog``)."""

    task_id: str
    log: str
    timestamp: str | None = None
    level: str | None = None
    allocation_id: str | None = None
    agent_id: str | None = None
    container_id: str | None = None
    rank_id: int | None = None
    source: str | None = None
    stdtype: str | None = None


@dataclass(frozen=True)
class LogRecord:
    """One stored line, detached from any session."""

    id: int
    task_id: str
    log: str
    timestamp: dt.datetime
    level: str | None = None
    allocation_id: str | None = None
    agent_id: str | None = None
    container_id: str | None = None
    rank_id: int | None = None
    source: str | None = None
    stdtype: str | None = None

    @classmethod
    def of(cls, row: TaskLog) -> LogRecord:
        return cls(
            id=row.id,
            task_id=row.task_id,
            log=row.log,
            timestamp=row.timestamp,
            level=row.level,
            allocation_id=row.allocation_id,
            agent_id=row.agent_id,
            container_id=row.container_id,
            rank_id=row.rank_id,
            source=row.source,
            stdtype=row.stdtype,
        )


def format_message(record: LogRecord) -> str:
    """Determined's flat line: ``[ts] <container8> [rank=N] || LEVEL: log``, ending in a newline."""
    stamp = record.timestamp.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    container = (record.container_id or "")[:_CONTAINER_WIDTH] or " " * _CONTAINER_WIDTH
    parts = [f"[{stamp}]", container]
    if record.rank_id is not None:
        parts.append(f"[rank={record.rank_id}]")
    parts.append("||")
    if record.level is not None:
        parts.append(f"{record.level}:")
    parts.append(record.log)
    message = " ".join(parts)
    return message if message.endswith("\n") else message + "\n"


def ingest_logs(
    session: Session, logs: Sequence[NewLog], *, caller_allocation_id: str | None
) -> list[str]:
    """Store posted lines (see the contract); returns the task ids they belong to."""
    if not logs:
        raise InvalidArgumentError("logs is empty")
    task_ids = list(dict.fromkeys(entry.task_id for entry in logs))
    own_task = None
    if caller_allocation_id is not None:
        own = session.get(Allocation, caller_allocation_id)
        own_task = own.task_id if own is not None else None
    for task_id in task_ids:
        if not task_id:
            raise InvalidArgumentError("every log line needs a task_id")
        if own_task is not None and task_id != own_task:
            raise ForbiddenError(f"task {own_task} cannot post logs of task {task_id}")
        if session.get(Task, task_id) is None:
            raise NotFoundError(f"task {task_id} not found")
    add_logs(session, logs)
    session.flush()
    return task_ids


def add_logs(session: Session, logs: Sequence[NewLog]) -> None:
    """Add lines whose task is known to exist (no checks; the caller commits, which wakes
    the tasks' followers). Lines matching a task-log webhook add its delivery to the same
    transaction (:func:`stalwart.master.services.webhooks.scan_logs`), and so do the trials'
    log policies (:func:`stalwart.master.services.log_policies.scan_logs`)."""
    now = utcnow()
    for task_id in {entry.task_id for entry in logs}:
        note_new_lines(session, task_id)
    session.add_all(
        TaskLog(
            task_id=entry.task_id,
            allocation_id=entry.allocation_id,
            agent_id=entry.agent_id,
            container_id=entry.container_id,
            rank_id=entry.rank_id,
            timestamp=parse_timestamp(entry.timestamp) or now,
            level=normalize_level(entry.level),
            stdtype=entry.stdtype,
            source=entry.source,
            log=entry.log,
        )
        for entry in logs
    )
    scan_logs(session, logs)  # task-log webhooks: costs nothing when there are none
    log_policies.scan_logs(session, logs)  # the trials' log_policies


@dataclass(frozen=True)
class LogFilter:
    """The filters of the log endpoints (empty means no filter)."""

    allocation_ids: Sequence[str] = ()
    agent_ids: Sequence[str] = ()
    container_ids: Sequence[str] = ()
    rank_ids: Sequence[int] = ()
    sources: Sequence[str] = ()
    stdtypes: Sequence[str] = ()
    levels: Sequence[str | None] = field(default=())
    timestamp_before: dt.datetime | None = None
    timestamp_after: dt.datetime | None = None
    search_text: str = ""


class contains_text(FunctionElement[bool]):  # noqa: N801 (an SQL function)
    """``contains_text(column, text)``: whether ``text`` occurs in ``column``, case-sensitive and
    literal (no wildcards), in the database: ``strpos(...) > 0`` on PostgreSQL, ``instr(...) >
    0`` on SQLite (whose ``LIKE`` ignores case)."""

    type = Boolean()
    inherit_cache = True
    name = "contains_text"


@compiles(contains_text)
def _contains_text_postgresql(element: contains_text, compiler: SQLCompiler, **kw: Any) -> str:
    return f"(strpos({compiler.process(element.clauses, **kw)}) > 0)"


@compiles(contains_text, "sqlite")
def _contains_text_sqlite(element: contains_text, compiler: SQLCompiler, **kw: Any) -> str:
    return f"(instr({compiler.process(element.clauses, **kw)}) > 0)"


def _with_null(column: InstrumentedAttribute[Any], values: Iterable[object]) -> ColumnElement[bool]:
    wanted = list(values)
    present = [v for v in wanted if v is not None]
    if len(present) == len(wanted):
        return column.in_(present)
    return or_(column.in_(present), column.is_(None))


def _conditions(task_id: str, flt: LogFilter) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [TaskLog.task_id == task_id]
    for column, values in (
        (TaskLog.allocation_id, flt.allocation_ids),
        (TaskLog.agent_id, flt.agent_ids),
        (TaskLog.container_id, flt.container_ids),
        (TaskLog.source, flt.sources),
        (TaskLog.stdtype, flt.stdtypes),
    ):
        if values:
            where.append(column.in_(list(values)))
    if flt.rank_ids:
        ranks = [None if r == -1 else r for r in flt.rank_ids]
        where.append(_with_null(TaskLog.rank_id, ranks))
    if flt.levels:
        where.append(_with_null(TaskLog.level, list(flt.levels)))
    if flt.timestamp_before is not None:
        where.append(TaskLog.timestamp <= flt.timestamp_before)
    if flt.timestamp_after is not None:
        where.append(TaskLog.timestamp > flt.timestamp_after)
    if flt.search_text:
        where.append(contains_text(TaskLog.log, literal(flt.search_text)))
    return where


def fetch_page(
    session: Session,
    task_id: str,
    flt: LogFilter,
    *,
    limit: int,
    after_id: int | None = None,
    before_id: int | None = None,
    descending: bool = False,
) -> list[LogRecord]:
    """At most ``limit`` lines of a task matching ``flt``, by id (newest first if descending)."""
    query = select(TaskLog).where(*_conditions(task_id, flt))
    if after_id is not None:
        query = query.where(TaskLog.id > after_id)
    if before_id is not None:
        query = query.where(TaskLog.id < before_id)
    query = query.order_by(TaskLog.id.desc() if descending else TaskLog.id).limit(limit)
    return [LogRecord.of(row) for row in session.scalars(query)]


def log_fields(session: Session, task_id: str) -> dict[str, list[Any]]:
    """Distinct values of the filterable fields of a task's lines (for ``logs/fields``)."""
    out: dict[str, list[Any]] = {}
    for name, column in (
        ("allocationIds", TaskLog.allocation_id),
        ("agentIds", TaskLog.agent_id),
        ("containerIds", TaskLog.container_id),
        ("rankIds", TaskLog.rank_id),
        ("stdtypes", TaskLog.stdtype),
        ("sources", TaskLog.source),
    ):
        query = (
            select(column)
            .distinct()
            .where(TaskLog.task_id == task_id, column.is_not(None))
            .order_by(column)
        )
        out[name] = list(session.scalars(query))
    return out


def trial_terminal(session: Session, trial_id: int) -> bool:
    """Whether a trial has ended (a missing trial counts as ended)."""
    trial = session.get(Trial, trial_id)
    return trial is None or trial.state in TRIAL_TERMINAL


def task_terminal(session: Session, task_id: str) -> bool:
    """Whether a task has ended: its trial is terminal, it has an end time, or (tasks without
    a trial) all of its allocations are terminated."""
    task = session.get(Task, task_id)
    if task is None:
        return True
    if task.trial_id is not None:
        return trial_terminal(session, task.trial_id)
    if task.end_time is not None:
        return True
    states = list(session.scalars(select(Allocation.state).where(Allocation.task_id == task_id)))
    return bool(states) and all(s == "TERMINATED" for s in states)


async def _run(sessions: SessionFactory, fn: Callable[[Session], object]) -> object:
    def work() -> object:
        with sessions() as session:
            return fn(session)

    return await anyio.to_thread.run_sync(work)


async def _page(
    sessions: SessionFactory,
    task_id: str,
    flt: LogFilter,
    *,
    limit: int,
    after_id: int | None = None,
    before_id: int | None = None,
    descending: bool = False,
) -> list[LogRecord]:
    def work() -> list[LogRecord]:
        with sessions() as session:
            return fetch_page(
                session,
                task_id,
                flt,
                limit=limit,
                after_id=after_id,
                before_id=before_id,
                descending=descending,
            )

    return await anyio.to_thread.run_sync(work)


async def stream_logs(
    sessions: SessionFactory,
    notifier: Notifier,
    task_id: str,
    flt: LogFilter,
    *,
    is_terminal: Callable[[Session], bool],
    limit: int = 0,
    descending: bool = False,
    follow: bool = False,
    page_size: int = PAGE_SIZE,
    recheck: float = 1.0,
) -> AsyncGenerator[LogRecord, None]:
    """The task's matching lines (see the contract): the first ``limit`` (0 = all) in id
    order, newest first if ``descending``; then, with ``follow``, every new line until the
    task is terminal and drained."""
    remaining = limit if limit > 0 else None
    cursor: int | None = None
    newest: int | None = None
    while remaining is None or remaining > 0:
        want = page_size if remaining is None else min(page_size, remaining)
        rows = await _page(
            sessions,
            task_id,
            flt,
            limit=want,
            after_id=None if descending else cursor,
            before_id=cursor if descending else None,
            descending=descending,
        )
        for row in rows:
            yield row
        if rows:
            cursor = rows[-1].id
            top = max(rows[0].id, rows[-1].id)
            newest = top if newest is None else max(newest, top)
        if remaining is not None:
            remaining -= len(rows)
        if len(rows) < want:
            break
    if not follow:
        return
    key = task_logs_key(task_id)
    while True:
        terminal = bool(await _run(sessions, is_terminal))
        while True:
            rows = await _page(sessions, task_id, flt, limit=page_size, after_id=newest)
            for row in rows:
                yield row
            if rows:
                newest = rows[-1].id
            if len(rows) < page_size:
                break
        if terminal or notifier.closed:  # closed: the master is stopping
            return
        await notifier.wait(key, recheck)


async def stream_fields(
    sessions: SessionFactory,
    notifier: Notifier,
    task_id: str,
    *,
    is_terminal: Callable[[Session], bool],
    follow: bool = False,
    recheck: float = 1.0,
) -> AsyncGenerator[dict[str, list[Any]], None]:
    """The task's distinct log field values; with ``follow``, again whenever they change,
    until the task is terminal."""

    def read(session: Session) -> tuple[bool, dict[str, list[Any]]]:
        return is_terminal(session), log_fields(session, task_id)

    terminal, fields = await anyio.to_thread.run_sync(lambda: _read_with(sessions, read))
    yield fields
    key = task_logs_key(task_id)
    while follow and not terminal and not notifier.closed:  # closed: the master is stopping
        await notifier.wait(key, recheck)
        terminal, latest = await anyio.to_thread.run_sync(lambda: _read_with(sessions, read))
        if latest != fields:
            fields = latest
            yield fields


def _read_with(
    sessions: SessionFactory,
    read: Callable[[Session], tuple[bool, dict[str, list[Any]]]],
) -> tuple[bool, dict[str, list[Any]]]:
    with sessions() as session:
        return read(session)
