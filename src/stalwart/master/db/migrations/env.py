"""Alembic environment: runs against the engine passed in ``config.attributes["engine"]``.

On SQLite, foreign keys are off while migrations run (and on again afterwards): batch mode
rebuilds a table by copying it and dropping the original, and with foreign keys on that
``DROP TABLE`` would delete the referencing rows of ``ON DELETE CASCADE`` children. The pragma
only takes effect outside a transaction, so it is set before the migrations begin one.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, Engine

from stalwart.master.db.tables import Base

engine = context.config.attributes.get("engine")
if not isinstance(engine, Engine):
    raise RuntimeError("run migrations through stalwart.master.db.migrate, which passes an engine")


def _sqlite_foreign_keys(connection: Connection, *, on: bool) -> None:
    connection.exec_driver_sql(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


with engine.connect() as connection:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        _sqlite_foreign_keys(connection, on=False)
    try:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=True,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        if sqlite:
            connection.rollback()  # nothing is open after the commit; after an error, end it
            _sqlite_foreign_keys(connection, on=True)
            connection.commit()
