"""Migrations are tested: upgrade -> models match -> downgrade -> upgrade, on SQLite and PostgreSQL.

``test_models_match_migrations`` is the check that fails when someone edits
``stalwart/master/db/tables.py`` without adding a migration (or the other way round). To fix it,
autogenerate a revision and review it (see ``docs/contributing/master.md``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine
from stalwart.master.db.tables import Base
from stalwart.master.settings import MasterSettings

VERSION_TABLE = "alembic_version"


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on an empty database: a SQLite file, or a private PostgreSQL schema."""
    db = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    settings = MasterSettings.model_validate({"home": tmp_path / "home", "db": db})
    eng = make_engine(settings.database_url)
    try:
        yield eng
    finally:
        eng.dispose()


def _differences(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def _leftovers(engine: Engine) -> set[str]:
    """Objects other than tables that a downgrade must also remove (PostgreSQL only)."""
    if engine.dialect.name != "postgresql":
        return set()
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "select 'sequence ' || sequence_name from information_schema.sequences "
                "where sequence_schema = current_schema() "
                "union all "
                "select 'type ' || t.typname from pg_type t "
                "join pg_namespace n on n.oid = t.typnamespace "
                "where n.nspname = current_schema() and t.typtype in ('e', 'd')"
            )
        )
        return {str(row[0]) for row in rows}


def _revisions_base_to_head() -> list[str]:
    scripts = ScriptDirectory(str(Path(migrate.__file__).parent / "migrations"))
    return [rev.revision for rev in reversed(list(scripts.walk_revisions()))]


def test_upgrade_check_downgrade_upgrade(engine: Engine) -> None:
    assert migrate.current_revision(engine) is None

    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    assert _differences(engine) == [], "tables.py and the migrations disagree"
    assert _tables(engine) == {*Base.metadata.tables, VERSION_TABLE}

    migrate.downgrade(engine)
    assert migrate.current_revision(engine) is None
    assert _tables(engine) <= {VERSION_TABLE}, "a downgrade to base left tables behind"
    assert _leftovers(engine) == set(), "a downgrade to base left objects behind"

    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    assert _differences(engine) == []


def test_upgrade_is_idempotent(engine: Engine) -> None:
    migrate.upgrade(engine)
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_every_revision_steps_up_and_down(engine: Engine) -> None:
    """The stairway: each revision upgrades, downgrades one step and upgrades again."""
    revisions = _revisions_base_to_head()
    assert revisions, "no migrations found"
    assert revisions[-1] == migrate.head_revision()
    for revision in revisions:
        migrate.upgrade(engine, revision)
        assert migrate.current_revision(engine) == revision
        migrate.downgrade(engine, "-1")
        migrate.upgrade(engine, revision)
        assert migrate.current_revision(engine) == revision
    assert _differences(engine) == []


def test_revisions_form_one_line() -> None:
    """One head, one base: branches must be merged before they land."""
    scripts = ScriptDirectory(str(Path(migrate.__file__).parent / "migrations"))
    assert len(scripts.get_heads()) == 1
    assert len(scripts.get_bases()) == 1
