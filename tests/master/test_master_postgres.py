"""The master runs on PostgreSQL: it migrates, bootstraps, logs in, and survives a restart."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_engine
from stalwart.master.settings import MasterSettings
from tests.master.conftest import login


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
        cluster_id = info["clusterId"]
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
        assert client.get("/info").json()["clusterId"] == cluster_id
        assert client.get("/api/v1/me", headers=headers).status_code == 200
        again = login(client, "admin")
        assert client.get("/api/v1/me", headers=again).json()["user"]["username"] == "admin"
