"""Ids and numbers past what the database stores are 400, on SQLite and on PostgreSQL.

Found by the REST fuzzing (``test_api_fuzz.py``, which runs on SQLite): an id past the 64-bit
range was SQLite's ``OverflowError``, and on PostgreSQL an id past the column's range is a data
exception (SQLSTATE class 22); both were 500. They are the client's mistake: 400
``InvalidArgument`` with a message saying what to check (``api/errors.py``). An in-process
master (lifespan run) on each database.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.settings import MasterSettings
from tests.master.conftest import login

PATHS = [
    "/api/v1/experiments/3000000000",
    "/api/v1/experiments/99999999999999999999",
    "/api/v1/trials/99999999999999999999",
    "/api/v1/trials/99999999999999999999/metrics/series?metric=loss",
    "/api/v1/trials/metrics/training_metrics?trialIds=99999999999999999999",
]


@pytest.fixture(params=["sqlite", "postgresql"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    db = None if request.param == "sqlite" else request.getfixturevalue("pg_url")
    settings = MasterSettings(home=tmp_path / "home", db=db)
    with TestClient(create_app(settings, run_cluster=False)) as test_client:
        yield test_client


@pytest.mark.parametrize("path", PATHS)
def test_an_id_out_of_range_is_400_not_500(client: TestClient, path: str) -> None:
    response = client.get(path, headers=login(client, "admin"))
    assert response.status_code in {400, 404}, (response.status_code, response.text[:300])
    if response.status_code == 400:
        assert "cannot store" in response.json()["message"], response.json()
