"""What every step of an import shares: the sessions, the mapping, the report."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from stalwart.master.db.tables import Base
from stalwart.master.importer.ids import Mappings, bump_sequence, free_id
from stalwart.master.importer.report import ImportReport
from stalwart.master.importer.source import DeterminedSource

__all__ = ["Context", "Progress", "aware"]

Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``: called as long steps advance (metrics, per batch)."""


def aware(value: dt.datetime | None) -> dt.datetime | None:
    """A Determined time as timezone-aware UTC (``tasks`` and ``allocations`` store naive UTC)."""
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


@dataclass
class Context:
    """One import run: where rows come from and go to, and what it has done so far.

    ``workspaces`` is the set of Determined workspace ids being imported (all, or the one
    ``--workspace`` names). A dry run flushes instead of committing and rolls everything back
    at the end; metrics are only counted.
    """

    session: Session
    source: DeterminedSource
    ids: Mappings
    report: ImportReport
    dry_run: bool
    workspaces: set[int]
    progress: Progress
    task_logs: bool = False
    """Whether the trials' task logs are imported too (``--task-logs``)."""
    filtered: bool = False
    """Whether ``--workspace`` chose one workspace (global webhooks are then left out)."""
    trials: list[tuple[int, int]] = field(default_factory=list)
    """(Determined trial id, Stalwart trial id) of every trial imported now or before."""

    def commit(self) -> None:
        """End a unit of work: commit (a dry run only flushes)."""
        if self.dry_run:
            self.session.flush()
        else:
            self.session.commit()

    def add(self, kind: str, row: Base, old_id: int) -> int:
        """Insert ``row`` (a table object with an integer ``id``) keeping ``old_id`` when it is
        free (:func:`~stalwart.master.importer.ids.free_id`), record the mapping, count it;
        the new id."""
        table: Any = type(row).__table__
        wanted = free_id(self.session, table, old_id)
        if wanted is not None:
            row.id = wanted  # type: ignore[attr-defined]
        self.session.add(row)
        self.session.flush()
        if wanted is not None:
            bump_sequence(self.session, table)
        new_id = int(row.id)  # type: ignore[attr-defined]
        if new_id != old_id:
            self.report.renumbered.append((kind, str(old_id), str(new_id)))
        self.ids.record(kind, old_id, new_id)
        self.report.count(kind, "imported")
        return new_id

    def user_id(self, old: int | None) -> int | None:
        """The Stalwart id of Determined user ``old`` (None for None)."""
        return None if old is None else self.ids.get_int("user", old)

    def workspace_id(self, old: int | None) -> int | None:
        return None if old is None else self.ids.get_int("workspace", old)
