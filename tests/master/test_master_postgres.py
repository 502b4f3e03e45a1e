"""The master runs on PostgreSQL: it migrates, bootstraps, logs in, and survives a restart."""

from __future__ import annotations

import threading
from pathlib import Path

from fastapi.testclient import TestClient

from stalwart.master.app import create_app, open_state
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine
from stalwart.master.services.metrics import MetricsInput, lock_validations, report_metrics_many
from stalwart.master.settings import MasterSettings
from tests.master.conftest import login
from tests.master.running_trials import running_trials
from tests.master.test_experiments_api import new_experiment


def _settings(home: Path, pg_url: str) -> MasterSettings:
    return MasterSettings(home=home, db=pg_url)


def test_master_starts_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    settings = _settings(tmp_path / "home", pg_url)
    assert settings.database_url.startswith("postgresql+psycopg://")
    with TestClient(create_app(settings, run_cluster=False)) as client:
        headers = login(client, "admin")
        me = client.get("/api/v1/me", headers=headers)
        assert me.status_code == 200, me.text
        assert me.json()["user"]["username"] == "admin"
        assert me.json()["user"]["admin"] is True
        info = client.get("/info").json()
        assert info["version"] == "0.38.1"
        cluster_id = info["cluster_id"]
    assert not (tmp_path / "home" / "master.db").exists(), "SQLite was used instead"

    engine = make_engine(settings.database_url)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()

    # A restart with another home: identity, users and sessions all live in the database.
    with TestClient(
        create_app(_settings(tmp_path / "other-home", pg_url), run_cluster=False)
    ) as client:
        assert client.get("/info").json()["cluster_id"] == cluster_id
        assert client.get("/api/v1/me", headers=headers).status_code == 200
        again = login(client, "admin")
        assert client.get("/api/v1/me", headers=again).json()["user"]["username"] == "admin"


def test_validation_inserts_of_one_experiment_commit_in_id_order(
    tmp_path: Path, pg_url: str
) -> None:
    """The searcher reads validations by id after a cursor: on PostgreSQL a second transaction
    inserting a validation of the same experiment waits for the first, so ids never become
    visible out of order (which would make the searcher skip one)."""
    state = open_state(_settings(tmp_path / "home", pg_url))
    try:
        exp_id, (trial_id,) = running_trials(state, 1, activate=True)
        holder = state.sessions()
        lock_validations(holder, [exp_id])  # an open ingest transaction of this experiment
        done = threading.Event()

        def report() -> None:
            with state.sessions() as session:
                report = MetricsInput(trial_id, 1, "validation", 1, {"loss": 0.5})
                report_metrics_many(session, [report])
            done.set()

        worker = threading.Thread(target=report)
        worker.start()
        assert not done.wait(1.0)  # waits for the open transaction
        holder.commit()
        holder.close()
        assert done.wait(10.0)
        worker.join()
    finally:
        state.engine.dispose()


def test_experiment_edits_and_resource_pools_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """``PATCH /api/v1/experiments/{id}`` rewrites the JSON config and labels on PostgreSQL too
    (the label filter reads the edited labels), and the pool list reads its agents."""
    settings = _settings(tmp_path / "home", pg_url)
    with TestClient(create_app(settings, run_cluster=False)) as client:
        headers = login(client, "admin")
        exp_id = new_experiment(client, headers)
        resp = client.patch(
            f"/api/v1/experiments/{exp_id}",
            json={"labels": ["pg"], "resources": {"priority": 5, "maxSlots": 2}},
            headers=headers,
        )
        assert resp.status_code == 200, resp.text
        body = client.get(f"/api/v1/experiments/{exp_id}", headers=headers).json()
        assert body["config"]["resources"]["priority"] == 5
        assert body["config"]["resources"]["max_slots"] == 2
        listed = client.get("/api/v1/experiments", params={"labels": "pg"}, headers=headers)
        assert [e["id"] for e in listed.json()["experiments"]] == [exp_id]
        pools = client.get("/api/v1/resource-pools", headers=headers).json()["resourcePools"]
        assert [p["name"] for p in pools] == ["default"]
