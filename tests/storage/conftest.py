"""Storage test fixtures: one real server per store and session (moto for S3,
gcp-storage-emulator for GCS, Azurite for Azure Blob), a new bucket or container per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.storage.azure import AzureServer, running_azure_server
from tests.storage.gcs import GCSServer, running_gcs_server
from tests.storage.s3 import S3Server, running_s3_server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    with running_s3_server() as server:
        yield server


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    return s3_server.new_bucket()


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GCSServer]:
    with running_gcs_server() as server:
        yield server


@pytest.fixture(scope="session")
def azure_server() -> Iterator[AzureServer]:
    with running_azure_server() as server:
        yield server
