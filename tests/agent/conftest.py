"""Fixtures for agent tests: a real master under uvicorn on a loopback port, trials with
allocation tokens, and helpers that wait on conditions (never on bare sleeps)."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from stalwart.agent.protocol import TaskSpec
from stalwart.master.app import create_app
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState
from tests.master.test_allocations_api import TrialEnv, login_headers, make_trial

WAIT_S = 10.0
PY = sys.executable


def wait_for(what: str, check: Callable[[], bool], timeout: float = WAIT_S) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@dataclass
class Master:
    """A live master: its URL, state, port and an admin's headers."""

    url: str
    port: int
    state: MasterState
    settings: MasterSettings

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=20.0)

    def admin(self) -> dict[str, str]:
        with self.http() as http:
            return login_headers(http)

    def trial(self) -> TrialEnv:
        """A new experiment with a trial and an allocation (its model has ``train.py``)."""
        with self.http() as http:
            return make_trial(http, self.state, login_headers(http))

    def task_logs(self, task_id: str) -> list[dict[str, Any]]:
        """Every stored line of a task, oldest first (the wire objects)."""
        with self.http() as http:
            resp = http.get(f"/api/v1/tasks/{task_id}/logs", headers=login_headers(http))
        assert resp.status_code == 200, resp.text
        return [json.loads(line)["result"] for line in resp.text.splitlines() if line]


@contextmanager
def serve(settings: MasterSettings, port: int = 0) -> Iterator[Master]:
    """Run a master (no cluster loop) under uvicorn on ``127.0.0.1:port`` (0: any free)."""
    app = create_app(settings, run_cluster=False)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            http="h11",
            ws="none",
            lifespan="on",
            timeout_graceful_shutdown=1,  # held long-polls of agents that are gone
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for("uvicorn to start", lambda: server.started or not thread.is_alive(), 15.0)
        assert server.started, "uvicorn did not start"
        yield Master(f"http://127.0.0.1:{port}", port, app.state.master, settings)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def master_settings(home: Path) -> MasterSettings:
    return MasterSettings.model_validate({"home": home})


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Master]:
    """One live master for the module's tests."""
    with serve(master_settings(tmp_path_factory.mktemp("master"))) as live:
        yield live


@pytest.fixture
def trial(master: Master) -> TrialEnv:
    return master.trial()


def closed_port() -> int:
    """A loopback port nobody listens on (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def task_spec(trial: TrialEnv, script: str, *, rank: int = 0, **extra: Any) -> TaskSpec:
    """A spec that runs ``python -c script`` for the trial's allocation."""
    fields: dict[str, Any] = {
        "allocation_id": trial.allocation_id,
        "task_id": trial.task_id,
        "rank": rank,
        "container_id": f"{trial.allocation_id}-c{rank}",
        "argv": [PY, "-c", script],
        "token": trial.token,
        **extra,
    }
    return TaskSpec.model_validate(fields)
