"""Alembic environment: runs against the engine passed in ``config.attributes["engine"]``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from stalwart.master.db.tables import Base

engine = context.config.attributes.get("engine")
if not isinstance(engine, Engine):
    raise RuntimeError("run migrations through stalwart.master.db.migrate, which passes an engine")

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
