"""Migrations are tested: upgrade -> models match -> downgrade -> upgrade, on SQLite and PostgreSQL.

``test_models_match_migrations`` is the check that fails when someone edits
``stalwart/master/db/tables.py`` without adding a migration (or the other way round). To fix it,
autogenerate a revision and review it (see ``docs/contributing/master.md``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import Engine, inspect, select, text, update

from stalwart.agent.protocol import AGENT_TOKEN_HEADER
from stalwart.master.app import create_app
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine, make_session_factory
from stalwart.master.db.tables import Base, Experiment, Trial, User
from stalwart.master.services.bootstrap import bootstrap
from stalwart.master.services.experiment_create import create_experiment
from stalwart.master.services.tasks import create_trial
from stalwart.master.settings import MasterSettings
from tests.master.conftest import enroll

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


def _schema(engine: Engine) -> list[tuple[str, str, str, list[str]]]:
    """Every object of a SQLite database with its SQL as sorted lines (two runs of the
    migrations may list a rebuilt table's constraints in another order)."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "select type, name, tbl_name, sql from sqlite_master order by type, name"
        )
        return [
            (kind, name, table, sorted(ln.strip().rstrip(",") for ln in (sql or "").splitlines()))
            for kind, name, table, sql in rows
        ]


def test_a_new_sqlite_database_from_the_schema_cache_is_what_the_migrations_build(
    engine: Engine, tmp_path: Path
) -> None:
    """The cache (STALWART_SQLITE_SCHEMA_CACHE; the test suite uses it) gives a new SQLite
    database the very schema the migrations build, at the head; a database with tables, or
    PostgreSQL, is left alone."""
    cache = tmp_path / "schema-cache"
    if engine.dialect.name != "sqlite":
        assert not migrate.copy_cached_schema(engine, cache)
        assert migrate.current_revision(engine) is None
        return
    migrated = make_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    copies = [make_engine(f"sqlite:///{tmp_path / f'copy{i}.db'}") for i in range(2)]
    try:
        migrate.upgrade(migrated)
        assert migrate.copy_cached_schema(copies[0], cache)  # builds the cached copy
        assert len(list(cache.glob("schema-*.sqlite"))) == 1
        assert migrate.copy_cached_schema(copies[1], cache)  # copies it
        assert len(list(cache.iterdir())) == 1  # nothing left over from building it
        for copy in copies:
            assert _schema(copy) == _schema(migrated)
            assert migrate.current_revision(copy) == migrate.head_revision()
            with copy.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert not migrate.copy_cached_schema(migrated, cache)  # it has tables: left alone
    finally:
        for each in (migrated, *copies):
            each.dispose()


def test_upgrade_is_idempotent(engine: Engine) -> None:
    migrate.upgrade(engine)
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_the_newest_migration_by_file_name_is_alembics_head() -> None:
    """``upgrade`` leaves a database at the head alone by comparing ``alembic_version`` with the
    newest ``NNNN_*.py``: that file must hold Alembic's head (name migrations that way)."""
    assert migrate.newest_revision() == migrate.head_revision()


def test_a_database_at_the_head_is_upgraded_without_alembic(engine: Engine) -> None:
    """A master starting on an up-to-date database (every start but the first after an
    upgrade) does not import Alembic: a fresh interpreter, so no earlier import counts."""
    migrate.upgrade(engine)
    probe = (
        "import sys; from stalwart.master.db import migrate; "
        "from stalwart.master.db.engine import make_engine; "
        f"migrate.upgrade(make_engine({engine.url.render_as_string(hide_password=False)!r})); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


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


def _autoincrement_tables(engine: Engine) -> set[str]:
    """SQLite tables declared ``AUTOINCREMENT`` (their freed ids are never handed out again)."""
    with engine.connect() as conn:
        rows = conn.execute(text("select name, sql from sqlite_master where type = 'table'"))
        return {str(name) for name, sql in rows if "AUTOINCREMENT" in str(sql).upper()}


def test_0006_makes_ids_autoincrement_and_keeps_rows_both_ways(engine: Engine) -> None:
    """0006 rebuilds the integer-id tables as AUTOINCREMENT on SQLite (a no-op on PostgreSQL,
    whose sequences never go back) and adds login_failures; its downgrade undoes both, rows kept.
    (``tests/master/test_ids.py`` migrates a database holding rows of every kind.)"""
    migrate.upgrade(engine, "0005")
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into users (id, username, admin, active, remote, modified_at) "
                "values (7, 'kept', false, true, false, '2026-01-01 00:00:00')"
            )
        )
    migrate.upgrade(engine, "0006")
    at_0006 = _tables(engine)
    assert "login_failures" in at_0006
    integer_ids = {  # the tables of 0006 (later revisions add more)
        table.name
        for table in Base.metadata.tables.values()
        if table.dialect_options["sqlite"]["autoincrement"] and table.name in at_0006
    }
    assert len(integer_ids) == 11
    if engine.dialect.name == "sqlite":
        assert _autoincrement_tables(engine) == integer_ids
    migrate.downgrade(engine, "0005")
    assert "login_failures" not in _tables(engine)
    if engine.dialect.name == "sqlite":
        assert _autoincrement_tables(engine) == set()
    with engine.connect() as conn:
        assert conn.execute(text("select username from users where id = 7")).scalar() == "kept"


def test_0007_adds_agent_credentials_and_keeps_the_agents_both_ways(engine: Engine) -> None:
    """0007 adds the agents' own tokens (table ``agent_credentials``) beside the agents of an
    existing database; its downgrade drops the table and keeps the agents."""
    migrate.upgrade(engine, "0006")
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into agents (id, version, resource_pool, addresses, registered_time, "
                "last_heartbeat, enabled, draining, connected) values ('n1', '', 'default', "
                "'[]', '2026-01-01 00:00:00', '2026-01-01 00:00:00', true, false, true)"
            )
        )
    migrate.upgrade(engine, "0007")
    assert "agent_credentials" in _tables(engine)
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into agent_credentials (agent_id, token_hash, created_at) "
                "values ('n1', :h, '2026-01-02 00:00:00')"
            ),
            {"h": "0" * 64},
        )
    migrate.downgrade(engine, "0006")
    assert "agent_credentials" not in _tables(engine)
    with engine.connect() as conn:
        assert conn.execute(text("select id from agents")).scalars().all() == ["n1"]


def test_a_master_upgraded_past_0007_enrolls_the_agents_it_knew(tmp_path: Path) -> None:
    """An agent of a cluster from before per-agent tokens keeps its id: its next sync, with
    the cluster token it has, enrolls it; then its own token works."""
    settings = MasterSettings.model_validate({"home": tmp_path / "home"})
    old = make_engine(settings.database_url)
    try:
        migrate.upgrade(old, "0006")
        with old.begin() as conn:
            conn.execute(
                text("insert into master_meta (key, value) values ('agent_token', 'cluster-token')")
            )
    finally:
        old.dispose()
    with TestClient(create_app(settings, run_cluster=False)) as client:
        assert client.app.state.master.agent_token == "cluster-token"  # type: ignore[attr-defined]
        headers = enroll(client, "n1", "cluster-token")
        body = {"slots": [{"id": "0", "device_type": "cpu"}]}
        assert client.post("/api/v1/agents/n1/sync", json=body, headers=headers).status_code == 200
        refused = client.post(
            "/api/v1/agents/n1/sync", json=body, headers={AGENT_TOKEN_HEADER: "cluster-token"}
        )
        assert refused.status_code == 401


def test_0020_backfills_each_experiments_best_trial_and_metric(
    engine: Engine, tmp_path: Path
) -> None:
    """0020 stores each experiment's best trial and searcher metric value, computed from its
    trials' values by its own ``smaller_is_better`` (ties to the lowest trial id)."""
    migrate.upgrade(engine)
    sessions = make_session_factory(engine)
    settings = MasterSettings.model_validate({"home": tmp_path / "home"})
    config = "entrypoint: python3 t.py\nsearcher: {{name: single, metric: loss{extra}}}\n"
    with sessions() as session:
        bootstrap(session, "")
        admin = session.scalars(select(User).where(User.username == "admin")).one()
        made = {}
        for name, extra in (("low", ""), ("high", ", smaller_is_better: false"), ("none", "")):
            exp = create_experiment(
                session,
                settings,
                admin,
                config_text=config.format(extra=extra),
                model_definition=[],
                activate=False,
            ).experiment
            trials = [create_trial(session, exp, hparams={}, seed=i) for i in range(3)]
            made[name] = (exp.id, [t.id for t in trials])
        values = {"low": (0.5, 0.2, 0.2), "high": (0.5, 0.9, 0.1), "none": (None,) * 3}
        for name, (_, trial_ids) in made.items():
            for trial_id, value in zip(trial_ids, values[name], strict=True):
                session.execute(
                    update(Trial).where(Trial.id == trial_id).values(searcher_metric_value=value)
                )
        session.commit()
    migrate.downgrade(engine, "0019")
    migrate.upgrade(engine)
    with sessions() as session:
        found = {
            name: session.execute(
                select(Experiment.best_trial_id, Experiment.best_searcher_metric).where(
                    Experiment.id == exp_id
                )
            ).one()
            for name, (exp_id, _) in made.items()
        }
    assert tuple(found["low"]) == (made["low"][1][1], 0.2)  # the tie goes to the lower id
    assert tuple(found["high"]) == (made["high"][1][1], 0.9)
    assert tuple(found["none"]) == (None, None)
