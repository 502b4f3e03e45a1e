"""Fixtures of the SDK tests: one real master and agent for the whole package.

``cluster`` and ``finished`` (a completed single-trial experiment) are shared by every test
here to keep the suite fast; tests that change state make their own experiments and users.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.client import Client, Experiment
from stalwart.local import LocalCluster
from tests.client.support import CONFIG, make_model_dir, running_cluster


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("client-cluster")) as running:
        yield running


@pytest.fixture(scope="package")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="package")
def admin_config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("admin-config")


@pytest.fixture(scope="package")
def admin(cluster: LocalCluster, admin_config_dir: Path) -> Iterator[Client]:
    """An admin client (empty password) with its own token cache."""
    with Client(cluster.url, "admin", "", config_dir=admin_config_dir, environ={}) as client:
        yield client


@pytest.fixture(scope="package")
def finished(admin: Client, model_dir: Path) -> Experiment:
    """A single-trial experiment run to COMPLETED."""
    exp = admin.create_experiment(CONFIG, model_dir)
    assert exp.wait(timeout=90, interval=0.1) == "COMPLETED"
    return exp
