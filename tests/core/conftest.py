"""A real master (API only: its cluster loop is off, tests own the trial rows) under uvicorn on a
loopback port, and trials whose task environment points at it.

``MasterServer`` can be stopped and started again on the same port and database (a master
restart). ``task_env`` builds the :class:`TaskEnv` a launcher would give a trial's process.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from stalwart.core import RetryPolicy, TaskEnv
from stalwart.master.app import create_app
from stalwart.master.db.tables import Allocation, Experiment, Trial
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState
from stalwart.master.transitions import set_allocation_state
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import add_trial, create_experiment, login_headers

SERVER_START_TIMEOUT_S = 15.0
FAST_RETRY = RetryPolicy(initial_backoff_s=0.05, max_backoff_s=0.5, deadline_s=30.0)
"""Short waits between retries so tests recover from a master restart quickly."""

CONFIG = """\
entrypoint: python3 train.py
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
  smaller_is_better: true
"""


class MasterServer:
    """The master app under uvicorn in a thread; restartable on the same port and database."""

    def __init__(self, settings: MasterSettings) -> None:
        self.settings = settings
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._state: MasterState | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> MasterState:
        assert self._state is not None, "the server is not running"
        return self._state

    def start(self) -> MasterServer:
        app = create_app(self.settings, run_cluster=False)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", http="h11", ws="none", timeout_graceful_shutdown=1
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not server.started:  # waiting for startup, not asserting on time
            if time.monotonic() > deadline or not thread.is_alive():
                server.should_exit = True
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        self._server, self._thread, self._sock = server, thread, sock
        self._state = app.state.master
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.should_exit = True
        assert self._thread is not None
        assert self._sock is not None
        self._thread.join(timeout=10)
        self._sock.close()
        self._server = self._thread = self._sock = None
        self._state = None

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=20.0)


def new_trial_environ(server: MasterServer, config: str = CONFIG) -> dict[str, str]:
    """A new experiment with one trial and a RUNNING allocation; the variables its process
    gets (wire doc 5.2)."""
    with server.client() as http:
        experiment_id = create_experiment(http, login_headers(http), config)
    made = add_trial(server.state, experiment_id)
    with server.state.sessions() as session:
        allocation = session.get(Allocation, made.allocation_id)
        experiment = session.get(Experiment, experiment_id)
        trial = session.get(Trial, made.trial_id)
        assert allocation is not None
        assert experiment is not None
        assert trial is not None
        set_allocation_state(session, allocation, "RUNNING")
        session.commit()
        return {
            "DET_MASTER": server.url,
            "DET_CLUSTER_ID": server.state.cluster_id,
            "DET_AGENT_ID": "agent-1",
            "DET_SLOT_IDS": "[0]",
            "DET_TASK_ID": made.task_id,
            "DET_ALLOCATION_ID": made.allocation_id,
            "DET_SESSION_TOKEN": made.token,
            "DET_TASK_TYPE": "TRIAL",
            "DET_TRIAL_ID": str(trial.id),
            "DET_EXPERIMENT_ID": str(experiment_id),
            "DET_TRIAL_RUN_ID": str(trial.run_id),
            "DET_TRIAL_SEED": str(trial.seed),
            "DET_HPARAMS": json.dumps(trial.hparams),
            "DET_EXPERIMENT_CONFIG": json.dumps(experiment.config),
            "DET_STEPS_COMPLETED": "0",
            "DET_USER": "admin",
        }


def new_trial(server: MasterServer, config: str = CONFIG) -> TaskEnv:
    """A new experiment with one trial and a RUNNING allocation; its task environment."""
    env = TaskEnv.from_environ(new_trial_environ(server, config))
    assert env is not None
    return env


def task_headers(env: TaskEnv) -> dict[str, str]:
    return {"Grpc-Metadata-x-allocation-token": f"Bearer {env.session_token}"}


def read_metrics(server: MasterServer, env: TaskEnv, group: str) -> list[dict[str, Any]]:
    """The trial's reports of ``group`` as the master streams them."""
    assert env.trial is not None
    with server.client() as http:
        resp = http.get(
            "/api/v1/trials/metrics/trial_metrics",
            params={"trialIds": env.trial.trial_id, "group": group},
            headers=login_headers(http),  # a task's token reaches only its own reporting routes
        )
    assert resp.status_code == 200, resp.text
    reports: list[dict[str, Any]] = []
    for line in resp.text.splitlines():
        if line:
            reports += json.loads(line)["result"]["metrics"]
    return reports


@pytest.fixture(scope="session")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterServer]:
    """One master for the tests of this package (each test makes its own experiment)."""
    home: Path = tmp_path_factory.mktemp("core-master")
    server = MasterServer(make_settings(home)).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def trial_env(master: MasterServer) -> TaskEnv:
    return new_trial(master)
