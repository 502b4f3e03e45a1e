"""Storage test fixtures: one real S3 server (moto) per session, a new bucket per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.storage.s3 import S3Server, running_s3_server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    with running_s3_server() as server:
        yield server


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    return s3_server.new_bucket()
