"""Integration fixtures: a real master and real agents as processes (:class:`LocalCluster`).

The master runs with short timeouts (agents lost after 15 s, preemption enforced after 30 s)
and a 0.5 s scheduling tick, so the tests see every path within seconds.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api

TRIALS = Path(__file__).parent / "trials"

MASTER_CONFIG = """\
cluster:
  agent_timeout: 15
  preemption_timeout: 30
  kill_grace: 3
  tick: 0.5
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def trial_files(*names: str) -> dict[str, str]:
    """The model definition: the named scripts of ``tests/integration/trials``."""
    return {name: (TRIALS / name).read_text() for name in names}


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalCluster]:
    """A running master with no agents yet (stopped, agents included, afterwards)."""
    config = tmp_path / "master.yaml"
    config.write_text(MASTER_CONFIG)
    cluster = LocalCluster(home=tmp_path / "home", port=free_port(), master_config=config)
    cluster.start_master()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def api(local: LocalCluster) -> Iterator[Api]:
    client = Api(local.url)
    try:
        yield client
    finally:
        client.close()
