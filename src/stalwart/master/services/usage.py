"""Historical usage: who held which slots when (``det resources ...``, the web UI's cluster
usage), read from the ``allocations`` table.

An allocation **held slots** from when the scheduler placed it (its first container's
``assigned_at``) until it ended (``end_time``; still running: now). Allocations never placed
hold nothing and are left out. A window ``[after, before)`` keeps the allocations that held
slots at some time in it; ``seconds`` are counted within the window only.

- :func:`allocation_rows`: one row per allocation (the allocations CSV): task, kind, owner,
  workspace, experiment and its labels, slots, pool, agent, start, end, seconds held, and
  ``pull_seconds`` (how long its image took to pull before it started; empty when nothing was
  pulled);
- :func:`aggregate`: slot-seconds per day or month, in total and by user, experiment label,
  resource pool and agent.

Who may read it: admins (it covers every user's work).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError
from stalwart.master.db.tables import (
    Allocation,
    Container,
    Experiment,
    Project,
    Task,
    User,
    Workspace,
)

__all__ = [
    "CSV_COLUMNS",
    "DAILY",
    "MONTHLY",
    "AllocationRow",
    "Period",
    "PeriodUsage",
    "aggregate",
    "allocation_rows",
    "csv_text",
    "parse_date",
    "parse_time",
]

CSV_COLUMNS = (
    "allocation_id",
    "task_id",
    "task_type",
    "username",
    "workspace_name",
    "experiment_id",
    "experiment_name",
    "labels",
    "slots",
    "resource_pool",
    "agent_id",
    "start_time",
    "end_time",
    "seconds",
    "pull_seconds",
)
"""The allocations CSV's columns, in order."""


def parse_time(value: str | None, what: str) -> dt.datetime:
    """An RFC 3339 time (or a bare date: its midnight UTC); 400 naming ``what`` otherwise."""
    if not value:
        raise InvalidArgumentError(
            f"{what} is required (an RFC 3339 time such as 2025-01-31T00:00:00Z)"
        )
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("z", "Z"))
    except ValueError:
        raise InvalidArgumentError(
            f"{what} {value!r} is not an RFC 3339 time (e.g. 2025-01-31T00:00:00Z)"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


def parse_date(value: str | None, what: str) -> dt.date:
    """A ``YYYY-MM-DD`` date; 400 naming ``what`` otherwise."""
    try:
        return dt.date.fromisoformat((value or "").strip())
    except ValueError:
        raise InvalidArgumentError(f"{what} {value!r} is not a date (YYYY-MM-DD)") from None


@dataclass(frozen=True)
class AllocationRow:
    """One allocation that held slots in the window."""

    allocation_id: str
    task_id: str
    task_type: str
    username: str
    user_id: int | None
    workspace_name: str
    experiment_id: int | None
    experiment_name: str
    labels: tuple[str, ...]
    slots: int
    resource_pool: str
    agent_id: str
    start_time: dt.datetime
    end_time: dt.datetime | None
    seconds: float
    """Seconds it held its slots within the window."""
    pull_seconds: float | None

    def overlap(self, start: dt.datetime, end: dt.datetime, now: dt.datetime) -> float:
        """Seconds it held its slots within ``[start, end)``."""
        held_from = max(self.start_time, start)
        held_to = min(self.end_time or now, end)
        return max(0.0, (held_to - held_from).total_seconds())

    def csv_values(self) -> list[str]:
        """Its cells, in :data:`CSV_COLUMNS` order."""
        return [
            self.allocation_id,
            self.task_id,
            self.task_type,
            self.username,
            self.workspace_name,
            "" if self.experiment_id is None else str(self.experiment_id),
            self.experiment_name,
            ",".join(self.labels),
            str(self.slots),
            self.resource_pool,
            self.agent_id,
            _iso(self.start_time),
            _iso(self.end_time),
            f"{self.seconds:.3f}",
            "" if self.pull_seconds is None else f"{self.pull_seconds:.3f}",
        ]


def _iso(value: dt.datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def allocation_rows(
    session: Session, after: dt.datetime, before: dt.datetime, now: dt.datetime
) -> list[AllocationRow]:
    """Every allocation that held slots at some time in ``[after, before)``, by start time;
    400 when the window ends before it starts."""
    if before < after:
        raise InvalidArgumentError(
            f"the window ends ({_iso(before)}) before it starts ({_iso(after)})"
        )
    placed = (
        select(Container.allocation_id, func.min(Container.assigned_at).label("placed_at"))
        .group_by(Container.allocation_id)
        .subquery()
    )
    query = (
        select(Allocation, Task, placed.c.placed_at)
        .join(placed, placed.c.allocation_id == Allocation.id)
        .join(Task, Task.task_id == Allocation.task_id)
        .where(placed.c.placed_at < before)
        .where((Allocation.end_time.is_(None)) | (Allocation.end_time >= after))
        .order_by(placed.c.placed_at, Allocation.id)
    )
    users: dict[int, User | None] = {}
    experiments: dict[int, Experiment | None] = {}
    workspaces: dict[int, str] = {}
    out = []
    for allocation, task, placed_at in session.execute(query):
        owner_id = task.owner_id
        experiment = None
        if task.experiment_id is not None:
            if task.experiment_id not in experiments:
                experiments[task.experiment_id] = session.get(Experiment, task.experiment_id)
            experiment = experiments[task.experiment_id]
        if experiment is not None:
            owner_id = experiment.owner_id
            project = session.get(Project, experiment.project_id)
            workspace_id = project.workspace_id if project is not None else None
        else:
            workspace_id = task.workspace_id
        if owner_id is not None and owner_id not in users:
            users[owner_id] = session.get(User, owner_id)
        owner = users.get(owner_id) if owner_id is not None else None
        if workspace_id is not None and workspace_id not in workspaces:
            found = session.get(Workspace, workspace_id)
            workspaces[workspace_id] = found.name if found is not None else ""
        start = placed_at if placed_at.tzinfo is not None else placed_at.replace(tzinfo=dt.UTC)
        row = AllocationRow(
            allocation_id=allocation.id,
            task_id=task.task_id,
            task_type=task.task_type,
            username=owner.username if owner is not None else "",
            user_id=owner.id if owner is not None else None,
            workspace_name=workspaces.get(workspace_id, "") if workspace_id is not None else "",
            experiment_id=experiment.id if experiment is not None else None,
            experiment_name=experiment.name if experiment is not None else "",
            labels=tuple(str(label) for label in (experiment.labels or []))
            if experiment is not None
            else (),
            slots=allocation.slots,
            resource_pool=allocation.resource_pool,
            agent_id=allocation.agent_id or "",
            start_time=start,
            end_time=allocation.end_time,
            seconds=0.0,
            pull_seconds=allocation.pull_seconds,
        )
        out.append(_with_seconds(row, row.overlap(after, before, now)))
    return out


def _with_seconds(row: AllocationRow, seconds: float) -> AllocationRow:
    return replace(row, seconds=seconds)


Period = str
"""``RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY`` or ``..._MONTHLY``."""
DAILY = "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY"
MONTHLY = "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_MONTHLY"


@dataclass
class PeriodUsage:
    """Slot-seconds of one day or month, in total and by each grouping."""

    period: Period
    start: dt.date
    seconds: float = 0.0
    by_username: dict[str, float] = field(default_factory=dict)
    by_experiment_label: dict[str, float] = field(default_factory=dict)
    by_resource_pool: dict[str, float] = field(default_factory=dict)
    by_agent: dict[str, float] = field(default_factory=dict)


def _periods(first: dt.date, last: dt.date, period: Period) -> list[tuple[dt.date, dt.date]]:
    out = []
    if period == MONTHLY:
        day = first.replace(day=1)
        while day <= last:
            following = (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
            out.append((day, following))
            day = following
    else:
        day = first
        while day <= last:
            out.append((day, day + dt.timedelta(days=1)))
            day += dt.timedelta(days=1)
    return out


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def aggregate(
    session: Session, first: dt.date, last: dt.date, period: Period, now: dt.datetime
) -> list[PeriodUsage]:
    """Slot-seconds (slots x seconds held) per day or month from ``first`` to ``last``
    (inclusive, UTC days), every period listed even when nothing ran; 400 for an unknown
    period, a reversed range, or more than ten years of days."""
    if period not in (DAILY, MONTHLY):
        raise InvalidArgumentError(f"period must be {DAILY} or {MONTHLY} (got {period!r})")
    if last < first:
        raise InvalidArgumentError(f"the end date {last} is before the start date {first}")
    if (last - first).days > 3660:
        raise InvalidArgumentError("at most ten years of usage can be aggregated at once")
    spans = _periods(first, last, period)
    rows = allocation_rows(session, _midnight(spans[0][0]), _midnight(spans[-1][1]), now)
    out = []
    for start_day, end_day in spans:
        usage = PeriodUsage(period=period, start=start_day)
        lo, hi = _midnight(start_day), _midnight(end_day)
        for row in rows:
            slot_seconds = row.slots * row.overlap(lo, hi, now)
            if slot_seconds <= 0:
                continue
            usage.seconds += slot_seconds
            _add(usage.by_username, row.username, slot_seconds)
            _add(usage.by_resource_pool, row.resource_pool, slot_seconds)
            _add(usage.by_agent, row.agent_id, slot_seconds)
            for label in row.labels:
                _add(usage.by_experiment_label, label, slot_seconds)
        out.append(usage)
    return out


def _add(into: dict[str, float], key: str, value: float) -> None:
    into[key] = into.get(key, 0.0) + value


def csv_text(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """CSV text (RFC 4180 quoting, ``\\n`` line ends)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()
