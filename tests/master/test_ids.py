"""Ids are never reused: a deleted experiment's id is never handed out again, also after a
master restart and on a database migrated from before ids were ``AUTOINCREMENT`` (SQLite and
PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, Integer, func, insert, select, text

from stalwart.master.app import create_app
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine
from stalwart.master.db.tables import Base
from stalwart.master.settings import MasterSettings
from tests.master.conftest import login, make_settings
from tests.master.test_experiments_api import add_trial, complete, new_experiment

BEFORE = "0005"
"""The revision before ids became AUTOINCREMENT on SQLite."""


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> MasterSettings:
    db = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    return make_settings(tmp_path / "home", db=db)


def test_every_integer_id_is_autoincrement_on_sqlite() -> None:
    for table in Base.metadata.sorted_tables:
        pk = list(table.primary_key.columns)
        if len(pk) == 1 and isinstance(pk[0].type, Integer) and pk[0].autoincrement is not False:
            assert table.dialect_options["sqlite"]["autoincrement"], table.name


def _delete(client: TestClient, headers: dict[str, str], exp_id: int) -> None:
    complete(client, exp_id)
    resp = client.delete(f"/api/v1/experiments/{exp_id}", headers=headers)
    assert resp.status_code == 200, resp.text
    assert client.get(f"/api/v1/experiments/{exp_id}", headers=headers).status_code == 404


def test_a_deleted_experiments_id_is_never_handed_out_again(settings: MasterSettings) -> None:
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        first = new_experiment(client, admin)
        second = new_experiment(client, admin)
        trial = add_trial(client, second)[0]
        _delete(client, admin, second)  # the highest id
        third = new_experiment(client, admin)
        assert third > second > first
        assert add_trial(client, third)[0] > trial
        assert client.get(f"/api/v1/experiments/{second}", headers=admin).status_code == 404
        assert client.get(f"/api/v1/trials/{trial}", headers=admin).status_code == 404
        _delete(client, admin, third)
    # a restarted master (the database opened again) does not hand it out either
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        fourth = new_experiment(client, admin)
        assert fourth > third
        assert client.get(f"/api/v1/experiments/{third}", headers=admin).status_code == 404
        assert client.get(f"/api/v1/experiments/{first}", headers=admin).status_code == 200


def _rows(**columns: Any) -> dict[str, Any]:
    return columns


def _fill_at_previous_revision(engine: Engine) -> None:
    """Rows as a master before revision 0006 wrote them (ids given explicitly)."""
    t = Base.metadata.tables
    config: dict[str, Any] = {"searcher": {"name": "single"}}
    with engine.begin() as conn:
        conn.execute(insert(t["users"]), [_rows(id=1, username="admin", admin=True)])
        conn.execute(insert(t["workspaces"]), [_rows(id=1, name="Uncategorized")])
        conn.execute(insert(t["projects"]), [_rows(id=1, name="Uncategorized", workspace_id=1)])
        conn.execute(
            insert(t["experiments"]),
            [
                _rows(
                    id=i,
                    name=f"e{i}",
                    state="COMPLETED",
                    project_id=1,
                    owner_id=1,
                    original_config="",
                    config=config,
                    searcher_type="single",
                    job_id=f"job-{i}",
                    parent_id=9 if i == 2 else None,  # forked from a deleted experiment 9
                )
                for i in (1, 2, 3)
            ],
        )
        conn.execute(
            insert(t["trials"]),
            [
                _rows(
                    id=10 + i,
                    experiment_id=i,
                    request_id=f"r{i}",
                    task_id=f"t{i}",
                    state="COMPLETED",
                    hparams={},
                )
                for i in (1, 2, 3)
            ],
        )
        conn.execute(
            insert(t["metric_reports"]),
            [
                _rows(id=100 + i, trial_id=10 + i, group="training", steps_completed=i, metrics={})
                for i in (1, 2, 3)
            ],
        )
        conn.execute(
            insert(t["task_logs"]), [_rows(id=1000 + i, task_id=f"t{i}", log="x") for i in (1, 2)]
        )
        if engine.dialect.name == "postgresql":
            # as the master's inserts would have left them: sequences at the highest id given
            for table in ("users", "workspaces", "projects", "experiments", "trials"):
                conn.execute(
                    text(
                        f"select setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(select max(id) from {table}))"
                    )
                )
        # experiment 3 (the highest) is deleted: its trial and reports go with it
        conn.execute(text("delete from experiments where id = 3"))


def _count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(select(func.count()).select_from(Base.metadata.tables[table])).scalar_one()
        )


def test_a_migrated_database_keeps_its_rows_and_never_reuses_a_freed_id(
    settings: MasterSettings,
) -> None:
    engine = make_engine(settings.database_url)
    try:
        migrate.upgrade(engine, BEFORE)
        _fill_at_previous_revision(engine)
        before = {
            name: _count(engine, name)
            for name in ("experiments", "trials", "metric_reports", "task_logs")
        }
        assert before == {"experiments": 2, "trials": 2, "metric_reports": 2, "task_logs": 2}
        migrate.upgrade(engine)
        assert migrate.current_revision(engine) == migrate.head_revision()
        # no row lost, none cascaded away by the table rebuilds
        assert {name: _count(engine, name) for name in before} == before
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                assert conn.execute(text("pragma foreign_key_check")).all() == []
                assert conn.execute(text("pragma foreign_keys")).scalar() == 1
                seqs: dict[str, int] = dict(
                    conn.execute(text("select name, seq from sqlite_sequence")).all()
                )
            assert seqs["experiments"] == 9  # past the deleted parent a fork still names
            assert seqs["trials"] == 12
            assert seqs["task_logs"] == 1002
    finally:
        engine.dispose()
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        assert client.get("/api/v1/experiments/2", headers=admin).status_code == 200
        new = new_experiment(client, admin)
        assert new > 3  # not the id of the experiment deleted before the migration
        if engine.dialect.name == "sqlite":
            assert new > 9
        _delete(client, admin, new)
        assert new_experiment(client, admin) > new
