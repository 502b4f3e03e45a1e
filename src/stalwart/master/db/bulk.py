"""Upserts run through the driver's ``executemany``, compiled once per dialect.

The ingest's hot statements (stored series, rollups, metric summaries) are upserts of rows of
numbers and short strings. Built and executed through SQLAlchemy for every batch they cost more
Python than the database work: an ``INSERT ... ON CONFLICT`` with ``CASE`` expressions is a
tree of a few hundred objects to construct and hash for the statement cache, and the ORM's
bulk path then processes every parameter of every row. :func:`execute_many` builds such a
statement once per dialect, compiles it, and hands the SQL and the rows to the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

__all__ = ["execute_many", "upsert_of"]

_COMPILED: dict[tuple[str, Callable[[str], Any]], tuple[str, tuple[str, ...]]] = {}


def upsert_of(dialect: str, table: Any) -> Any:
    """``INSERT INTO table`` in the dialect's form that takes ``ON CONFLICT`` (PostgreSQL's,
    else SQLite's)."""
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def execute_many(
    session: Session,
    build: Callable[[str], Any],
    columns: Sequence[str],
    rows: list[tuple[Any, ...]],
) -> None:
    """Run the statement ``build`` makes for a dialect name on many rows (values in
    ``columns`` order), in the session's transaction.

    ``build`` is called once per dialect and process (the compiled SQL is kept, keyed by the
    function), so it must depend on nothing but the dialect. The rows go to the driver as
    they are (no SQLAlchemy type processing: numbers, strings and None only), sorted, so
    that rows whose key columns come first are written in key order."""
    if not rows:
        return
    connection = session.connection()
    dialect = connection.dialect
    found = _COMPILED.get((dialect.name, build))
    if found is None:
        compiled = build(dialect.name).compile(dialect=dialect, column_keys=list(columns))
        order = tuple(compiled.positiontup or ()) if dialect.positional else tuple(columns)
        found = _COMPILED[(dialect.name, build)] = (str(compiled), order)
    sql, order = found
    rows.sort()
    if dialect.positional:
        index = [columns.index(key) for key in order]
        params: list[Any] = [tuple(row[i] for i in index) for row in rows]
    else:
        params = [dict(zip(columns, row, strict=True)) for row in rows]
    connection.exec_driver_sql(sql, params)
