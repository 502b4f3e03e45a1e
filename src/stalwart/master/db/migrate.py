"""Running the Alembic migrations programmatically (the master upgrades at start).

The same migrations run on SQLite and PostgreSQL (``render_as_batch`` makes ALTERs work on
SQLite).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

__all__ = ["current_revision", "downgrade", "head_revision", "upgrade"]

_SCRIPTS = Path(__file__).parent / "migrations"


def _config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database schema to ``revision`` (default: the newest)."""
    command.upgrade(_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Take the schema back to ``revision`` (default: empty)."""
    command.downgrade(_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    """The newest revision the code knows."""
    return ScriptDirectory.from_config(_config_without_engine()).get_current_head()


def _config_without_engine() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    return cfg
