"""Writing many rows fast, inside the session's transaction.

PostgreSQL: ``COPY ... FROM STDIN`` on the session's own connection (so it commits or rolls
back with everything else); SQLite: one ``executemany``. JSON columns are written as the text
given, verbatim (their column type here is ``Text``): callers pass JSON text they did not
decode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import column, insert, table
from sqlalchemy.orm import Session
from sqlalchemy.types import TypeEngine

__all__ = ["write_rows"]


def write_rows(
    session: Session,
    name: str,
    columns: Sequence[tuple[str, TypeEngine[Any]]],
    rows: Sequence[tuple[Any, ...]],
) -> None:
    """Insert ``rows`` (values in ``columns`` order) into table ``name``."""
    if not rows:
        return
    if session.get_bind().dialect.name == "postgresql":
        raw = session.connection().connection.driver_connection
        names = ", ".join(f'"{column_name}"' for column_name, _ in columns)
        cursor = raw.cursor()  # type: ignore[union-attr]
        with cursor, cursor.copy(f"COPY {name} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return
    target = table(name, *(column(n, t) for n, t in columns))
    keys = [n for n, _ in columns]
    session.execute(insert(target), [dict(zip(keys, row, strict=True)) for row in rows])
