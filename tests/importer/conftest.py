"""Fixtures of the importer's tests: a seeded Determined database, Stalwart targets.

``determined``: a database of its own on the test PostgreSQL server (``STALWART_TEST_PG_URL``),
holding Determined 0.38.1's captured schema and the seeder's rows (one per module: the importer
never writes to it). ``target``: the Stalwart master database to import into, SQLite and
PostgreSQL (a schema of its own, ``pg_url``). Without PostgreSQL the tests skip, except under
``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine

from stalwart.master.db.engine import make_engine
from tests.conftest import PG_URL
from tests.importer.seed import Seeded, create_determined_database, drop_database, seed


@dataclass
class Determined:
    """A seeded Determined database."""

    url: str
    seeded: Seeded


def _server() -> str:
    try:
        with psycopg.connect(PG_URL, connect_timeout=5):
            pass
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {PG_URL} is required under CI=true: {exc}")
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable: {exc}")
    return PG_URL


def new_determined(storage: Path) -> Generator[Determined, None, None]:
    """A fresh seeded Determined database (dropped afterwards)."""
    server = _server()
    name = f"det_{uuid.uuid4().hex[:12]}"
    url = create_determined_database(server, name)
    try:
        yield Determined(url, seed(url, storage))
    finally:
        drop_database(server, name)


@pytest.fixture(scope="module")
def determined(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Determined]:
    """A seeded Determined database shared by a module's tests (never written by them)."""
    yield from new_determined(tmp_path_factory.mktemp("det-checkpoints"))


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An empty Stalwart master database (the importer migrates and bootstraps it)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'master.db'}"
    else:
        url = request.getfixturevalue("pg_url").replace("postgresql://", "postgresql+psycopg://", 1)
    engine = make_engine(url)
    yield engine
    engine.dispose()
