"""Fixtures for every test package: a private PostgreSQL schema when PostgreSQL is reachable.

``CI=true`` makes a missing PostgreSQL a failure instead of a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

PG_URL = os.environ.get("STALWART_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose schema is private to this test (dropped afterwards).

    Skips when PostgreSQL is unreachable, except under CI=true, where it fails.
    """
    base = PG_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        engine = create_engine(base)
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except Exception as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {PG_URL} is required under CI=true: {exc}")
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable: {exc}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.execute(text(f'create schema "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'drop schema "{schema}" cascade'))
        engine.dispose()
