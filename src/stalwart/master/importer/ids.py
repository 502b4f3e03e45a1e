"""Keeping Determined's ids where they are free, and what was imported.

An imported row keeps its Determined id when that id is **free**: above every id the table
has ever handed out (its highest row, and its sequence: SQLite's ``sqlite_sequence``,
PostgreSQL's serial sequence). An id at or below that mark may have named a row that was
deleted since, and ids are never reused (``docs/contributing/master.md``), so such a row gets
the next id instead, and the mapping says so. After an explicit id, PostgreSQL's sequence is
moved up to it (SQLite's ``AUTOINCREMENT`` follows by itself).

:class:`Mappings` reads and writes ``import_mappings`` inside the caller's transaction: the row
recording an import commits with the import, or neither does.
"""

from __future__ import annotations

from sqlalchemy import Table, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from stalwart.master.db.tables import ImportMapping

__all__ = ["Mappings", "bump_sequence", "free_id"]


def _high_water(session: Session, table: Table) -> int:
    highest = int(session.scalar(select(func.max(table.c.id))) or 0)
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite":
        seq = session.scalar(
            text("SELECT seq FROM sqlite_sequence WHERE name = :name"), {"name": table.name}
        )
    else:
        seq = session.scalar(
            text(
                "SELECT pg_sequence_last_value(CAST(pg_get_serial_sequence(:name, 'id') "
                "AS regclass))"
            ),
            {"name": table.name},
        )
    return max(highest, int(seq or 0))


def free_id(session: Session, table: Table, wanted: int) -> int | None:
    """``wanted`` if no row of ``table`` has, or ever had, that id or a higher one; else None
    (let the table give the next id)."""
    return wanted if wanted > _high_water(session, table) else None


def bump_sequence(session: Session, table: Table) -> None:
    """After rows were inserted with explicit ids: PostgreSQL's sequence of ``table`` moves up
    to its highest id (never down), so the next id it hands out is past them."""
    if session.get_bind().dialect.name != "postgresql":
        return
    highest = session.scalar(select(func.max(table.c.id)))
    if highest is None:
        return
    session.execute(
        text(
            "SELECT setval(pg_get_serial_sequence(:name, 'id'), GREATEST(:highest, "
            "COALESCE(pg_sequence_last_value(CAST(pg_get_serial_sequence(:name, 'id') "
            "AS regclass)), 1)))"
        ),
        {"name": table.name, "highest": int(highest)},
    )


class Mappings:
    """The ``import_mappings`` rows of one source (a Determined cluster id), cached."""

    def __init__(self, session: Session, source: str) -> None:
        self.session = session
        self.source = source
        self._known: dict[tuple[str, str], str] = {}
        self.reload()

    def reload(self) -> None:
        """Read the committed rows again (after a rollback dropped some of this run's)."""
        self._known = {
            (row.kind, row.old_id): row.new_id
            for row in self.session.scalars(
                select(ImportMapping).where(ImportMapping.source == self.source)
            )
        }

    def get(self, kind: str, old: object) -> str | None:
        """The new id of ``kind`` ``old``, if it was imported."""
        return self._known.get((kind, str(old)))

    def items(self, kind: str) -> list[tuple[str, str]]:
        """Every ``(old, new)`` of ``kind`` known so far (this run's included)."""
        return [(old, new) for (k, old), new in self._known.items() if k == kind]

    def get_int(self, kind: str, old: object) -> int | None:
        found = self.get(kind, old)
        return int(found) if found is not None else None

    def record(self, kind: str, old: object, new: object) -> None:
        """Record (or move, for a watermark) ``kind`` ``old`` as ``new``, in the session's
        transaction."""
        values = {"source": self.source, "kind": kind, "old_id": str(old), "new_id": str(new)}
        dialect = self.session.get_bind().dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        statement = insert(ImportMapping).values(**values)
        self.session.execute(
            statement.on_conflict_do_update(
                index_elements=["source", "kind", "old_id"],
                set_={"new_id": statement.excluded.new_id},
            )
        )
        self._known[(kind, str(old))] = str(new)
