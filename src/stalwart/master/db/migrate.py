"""Running the Alembic migrations programmatically (the master upgrades at start).

The same migrations run on SQLite and PostgreSQL (``render_as_batch`` makes ALTERs work on
SQLite).

A new SQLite database can instead get the schema copied from a cache (:func:`copy_cached_schema`,
when ``STALWART_SQLITE_SCHEMA_CACHE`` names a directory): building it runs every migration, and
on SQLite each ALTER rebuilds its table, about 0.4 s of CPU, which a test suite that opens a
fresh master per test pays thousands of times. The cached file is what the migrations built,
once per set of migrations (its name carries a hash of their files), so the copy is the same
schema, ``alembic_version`` included.

:func:`upgrade` to the head first reads ``alembic_version`` itself: a database already at the
newest migration (``NNNN_*.py`` with the highest number; a test checks Alembic agrees) is left
alone without importing Alembic, which costs a master about a third of a second of CPU at each
start.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, make_url, text
from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "SCHEMA_CACHE_VARIABLE",
    "copy_cached_schema",
    "current_revision",
    "downgrade",
    "head_revision",
    "newest_revision",
    "upgrade",
]

_SCRIPTS = Path(__file__).parent / "migrations"
SCHEMA_CACHE_VARIABLE = "STALWART_SQLITE_SCHEMA_CACHE"
"""Names the directory of :func:`copy_cached_schema`'s cache (unset: no cache)."""


def _config(engine: Engine) -> Config:
    cfg = _config_without_engine()
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database schema to ``revision`` (default: the newest)."""
    if revision == "head" and _stored_revision(engine) == newest_revision():
        return
    from alembic import command

    command.upgrade(_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Take the schema back to ``revision`` (default: empty)."""
    from alembic import command

    command.downgrade(_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    """The newest revision the code knows (as Alembic reads the migrations)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config_without_engine()).get_current_head()


@functools.cache
def newest_revision() -> str:
    """The newest migration's revision, from the file names alone (``NNNN_what.py`` holds
    revision ``NNNN``)."""
    return max(path.name.partition("_")[0] for path in (_SCRIPTS / "versions").glob("[0-9]*.py"))


def _stored_revision(engine: Engine) -> str | None:
    """``alembic_version``'s one row, or None (no such table, or not exactly one row)."""
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except DBAPIError:  # no table yet: a new database
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def _config_without_engine() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    return cfg


def copy_cached_schema(engine: Engine, cache: Path) -> bool:
    """Give ``engine``'s database the newest schema from the cache in ``cache`` (building the
    cached copy first when this set of migrations has none): True when it did; False, leaving
    the database alone, unless it is a SQLite file without any table yet. Callers still run
    :func:`upgrade`, which then finds the database at the head."""
    url = make_url(engine.url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return False
    raw = engine.raw_connection()
    try:
        target = raw.driver_connection
        assert isinstance(target, sqlite3.Connection)
        if target.execute("select count(*) from sqlite_master").fetchone() != (0,):
            return False
        with sqlite3.connect(_cached_schema(cache)) as source:
            source.backup(target)
        return True
    finally:
        raw.close()


def _cached_schema(cache: Path) -> Path:
    """The cached database of this set of migrations, built by them if it is not there yet
    (several processes may build it at once: each renames its own copy into place)."""
    found = cache / f"schema-{_migrations_digest()}.sqlite"
    if found.exists():
        return found
    cache.mkdir(parents=True, exist_ok=True)
    fd, building = tempfile.mkstemp(dir=cache, prefix=".building-", suffix=".sqlite")
    os.close(fd)
    try:
        from stalwart.master.db.engine import make_engine  # engine.py needs nothing from here

        built = make_engine(f"sqlite:///{building}")
        try:
            upgrade(built)
            with built.connect() as connection:  # one self-contained file: no WAL beside it
                connection.exec_driver_sql("PRAGMA journal_mode=DELETE")
        finally:
            built.dispose()
        os.replace(building, found)
    finally:
        for leftover in (building, building + "-wal", building + "-shm"):
            Path(leftover).unlink(missing_ok=True)
    return found


@functools.cache
def _migrations_digest() -> str:
    """A hash of the migration files (read once per process: they do not change under it)."""
    digest = hashlib.sha256()
    for path in sorted(_SCRIPTS.rglob("*.py")):
        digest.update(path.relative_to(_SCRIPTS).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
