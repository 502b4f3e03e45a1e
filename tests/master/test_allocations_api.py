"""What a running task asks about its own allocation: context directory, accelerator data,
rendezvous, preemption signals (long poll), all-gather; and the rule that an allocation token
only opens its own allocation.

The helpers at the top (a live uvicorn server, an experiment with a trial and an allocation)
are shared by the other API tests of this issue.
"""

from __future__ import annotations

import asyncio
import base64
import io
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from stalwart.errors import FailedPreconditionError, InvalidArgumentError
from stalwart.master.app import create_app
from stalwart.master.db.tables import Allocation, Experiment, Task
from stalwart.master.services import agents as agent_service
from stalwart.master.services.allocations import AllGather, container_id, signal_preemption
from stalwart.master.services.passwords import client_hash
from stalwart.master.services.tasks import create_trial, start_allocation
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState
from stalwart.master.transitions import set_allocation_state

CONFIG = """\
entrypoint: python3 train.py
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
"""
SERVER_START_TIMEOUT_S = 15.0
HTTP_TIMEOUT = httpx.Timeout(20.0)


def login_headers(http: httpx.Client, username: str = "admin") -> dict[str, str]:
    """Log in as the official client does; the Authorization header."""
    resp = http.post(
        "/api/v1/auth/login",
        json={"username": username, "password": client_hash(""), "isHashed": True},
    )
    assert resp.status_code == 200, resp.text
    http.cookies.clear()
    return {"Authorization": f"Bearer {resp.json()['token']}"}


def task_headers(token: str) -> dict[str, str]:
    """The header a task's Core API sends."""
    return {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}


@dataclass
class TrialEnv:
    """An experiment, one trial, its task and one allocation with its token."""

    experiment_id: int
    trial_id: int
    task_id: str
    allocation_id: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return task_headers(self.token)


def create_experiment(http: httpx.Client, headers: dict[str, str], config: str = CONFIG) -> int:
    files = [
        {
            "path": "train.py",
            "type": 48,
            "content": base64.b64encode(b"print('hi')\n").decode(),
            "mode": 0o100644,
            "mtime": "1700000000",
            "uid": 0,
            "gid": 0,
        }
    ]
    resp = http.post(
        "/api/v1/experiments",
        json={"activate": True, "config": config, "modelDefinition": files},
        headers=headers,
    )
    assert resp.status_code == 200, resp.text
    experiment_id: int = resp.json()["experiment"]["id"]
    return experiment_id


def add_trial(
    state: MasterState,
    experiment_id: int,
    *,
    slots: int = 1,
    agent_id: str | None = None,
    hparams: dict[str, object] | None = None,
) -> TrialEnv:
    """A new trial of the experiment with a first allocation (rows only)."""
    with state.sessions() as session:
        experiment = session.get(Experiment, experiment_id)
        assert experiment is not None
        trial = create_trial(session, experiment, hparams=hparams or {"lr": 0.1}, seed=1)
        allocation, token = start_allocation(session, trial.task_id, slots=slots, agent_id=agent_id)
        session.commit()
        return TrialEnv(experiment_id, trial.id, trial.task_id, allocation.id, token)


def make_trial(
    http: httpx.Client,
    state: MasterState,
    headers: dict[str, str],
    *,
    config: str = CONFIG,
    slots: int = 1,
    agent_id: str | None = None,
) -> TrialEnv:
    """A new experiment with one trial and one allocation."""
    return add_trial(
        state, create_experiment(http, headers, config), slots=slots, agent_id=agent_id
    )


def master_state(client: TestClient) -> MasterState:
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]
    return state


@dataclass
class LiveServer:
    """A real uvicorn server on a loopback port and its master state."""

    url: str
    state: MasterState
    app: Any

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=HTTP_TIMEOUT)


@contextmanager
def live_server(settings: MasterSettings) -> Iterator[LiveServer]:
    """Run the master under uvicorn in a background thread (chunked HTTP/1.1 for real)."""
    app = create_app(settings, run_cluster=False)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        http="h11",
        ws="none",
        lifespan="on",
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(url=f"http://127.0.0.1:{port}", state=app.state.master, app=app)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def env(client: TestClient, admin: dict[str, str]) -> TrialEnv:
    return make_trial(client, master_state(client), admin)


@pytest.fixture
def other(client: TestClient, admin: dict[str, str]) -> TrialEnv:
    return make_trial(client, master_state(client), admin)


def allocation_row(client: TestClient, allocation_id: str) -> Allocation:
    with master_state(client).sessions() as session:
        row = session.get(Allocation, allocation_id)
        assert row is not None
        return row


# --- access rules -------------------------------------------------------------------------------

ENDPOINTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/api/v1/tasks/{task}/context_directory", None),
    ("POST", "/api/v1/allocations/{alloc}/acceleratorData", {"acceleratorData": {}}),
    ("GET", "/api/v1/allocations/{alloc}/resources/r1/rendezvous", None),
    ("GET", "/api/v1/allocations/{alloc}/signals/preemption?timeout_seconds=0", None),
    ("POST", "/api/v1/allocations/{alloc}/signals/ack_preemption", None),
    ("POST", "/api/v1/allocations/{alloc}/signals/pending_preemption", None),
    ("POST", "/api/v1/allocations/{alloc}/all_gather", {"requestUuid": "u", "numPeers": 1}),
]


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_task_endpoints_need_credentials_and_their_own_allocation(
    client: TestClient,
    env: TrialEnv,
    other: TrialEnv,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    url = path.format(task=env.task_id, alloc=env.allocation_id)
    assert client.request(method, url, json=body).status_code == 401
    denied = client.request(method, url, json=body, headers=other.headers)
    assert denied.status_code == 403, denied.text
    assert denied.json()["error"]["reason"] == "PermissionDenied"
    assert client.request(method, url, json=body, headers=env.headers).status_code == 200


def test_a_user_who_does_not_own_the_task_is_refused(client: TestClient, env: TrialEnv) -> None:
    user = login_headers(client, "determined")
    url = f"/api/v1/allocations/{env.allocation_id}/signals/ack_preemption"
    assert client.post(url, headers=user).status_code == 403
    assert client.post(url, headers=login_headers(client)).status_code == 200
    missing = client.post("/api/v1/allocations/nope.1/signals/ack_preemption", headers=user)
    assert missing.status_code == 404


# --- context directory and accelerator data ------------------------------------------------------


def test_context_directory_is_the_experiments_model_definition(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    resp = client.get(f"/api/v1/tasks/{env.task_id}/context_directory", headers=env.headers)
    assert resp.status_code == 200
    blob = base64.b64decode(resp.json()["b64Tgz"])
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        assert tar.getnames() == ["train.py"]
    as_user = client.get(f"/api/v1/tasks/{env.task_id}/context_directory", headers=admin)
    assert as_user.json() == resp.json()


def test_context_directory_is_empty_for_a_task_without_one(
    client: TestClient, admin: dict[str, str]
) -> None:
    with master_state(client).sessions() as session:
        session.add(Task(task_id="cmd-1", task_type="COMMAND", owner_id=1))
        session.commit()
    resp = client.get("/api/v1/tasks/cmd-1/context_directory", headers=admin)
    assert resp.status_code == 200
    assert resp.json() == {"b64Tgz": ""}
    assert client.get("/api/v1/tasks/nope/context_directory", headers=admin).status_code == 404


def test_accelerator_data_is_stored(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    body = {
        "acceleratorData": {
            "acceleratorType": "cpu",
            "acceleratorUuids": [],
            "allocationId": env.allocation_id,
            "containerId": "c1",
            "nodeName": "node-a",
            "taskId": env.task_id,
        },
        "allocationId": env.allocation_id,
    }
    resp = client.post(
        f"/api/v1/allocations/{env.allocation_id}/acceleratorData",
        content=httpx.Request("POST", "/", json=body).content,  # no Content-Type, as the client
        headers=env.headers,
    )
    assert resp.status_code == 200, resp.text
    assert resp.json() == {}
    listed = client.get(f"/api/v1/tasks/{env.task_id}/acceleratorData", headers=admin).json()
    (entry,) = listed["acceleratorData"]
    assert entry["nodeName"] == "node-a"
    assert entry["acceleratorType"] == "cpu"
    assert entry["allocationId"] == env.allocation_id


# --- rendezvous ----------------------------------------------------------------------------------


def test_rendezvous_of_a_single_container_allocation(client: TestClient, env: TrialEnv) -> None:
    resp = client.get(
        f"/api/v1/allocations/{env.allocation_id}/resources/{container_id(env.allocation_id)}"
        "/rendezvous",
        headers=env.headers,
    )
    assert resp.status_code == 200
    assert resp.json() == {"rendezvousInfo": {"addresses": ["127.0.0.1"], "rank": 0, "slots": [1]}}


def test_rendezvous_uses_the_agents_address(client: TestClient, admin: dict[str, str]) -> None:
    state = master_state(client)
    with state.sessions() as session:
        agent_service.register_agent(
            session,
            "agent-a",
            slots=[("0", "cuda", "A100", "GPU-0"), ("1", "cuda", "A100", "GPU-1")],
            addresses=["10.1.2.3"],
        )
        session.commit()
    env = make_trial(client, state, admin, slots=2, agent_id="agent-a")
    resp = client.get(
        f"/api/v1/allocations/{env.allocation_id}/resources/any/rendezvous", headers=env.headers
    )
    assert resp.json()["rendezvousInfo"] == {"addresses": ["10.1.2.3"], "rank": 0, "slots": [2]}


# --- preemption ----------------------------------------------------------------------------------


def test_preemption_poll_returns_the_flag(client: TestClient, env: TrialEnv) -> None:
    url = f"/api/v1/allocations/{env.allocation_id}/signals/preemption"
    assert client.get(url, params={"timeout_seconds": "0"}, headers=env.headers).json() == {
        "preempt": False
    }
    state = master_state(client)
    assert signal_preemption(state.sessions, state.notifier, env.allocation_id) is True
    assert signal_preemption(state.sessions, state.notifier, env.allocation_id) is False
    started = time.monotonic()
    resp = client.get(url, params={"timeoutSeconds": "30"}, headers=env.headers)
    assert resp.json() == {"preempt": True}
    assert time.monotonic() - started < 5


def test_a_terminating_allocation_is_told_to_stop(client: TestClient, env: TrialEnv) -> None:
    with master_state(client).sessions() as session:
        row = session.get(Allocation, env.allocation_id)
        assert row is not None
        set_allocation_state(session, row, "TERMINATING")
        session.commit()
    url = f"/api/v1/allocations/{env.allocation_id}/signals/preemption"
    resp = client.get(url, params={"timeout_seconds": "0"}, headers=env.headers)
    assert resp.json() == {"preempt": True}


def test_ack_and_pending_preemption(client: TestClient, env: TrialEnv) -> None:
    base = f"/api/v1/allocations/{env.allocation_id}/signals"
    assert (
        client.post(
            f"{base}/pending_preemption",
            json={"allocationId": env.allocation_id},
            headers=env.headers,
        ).status_code
        == 200
    )
    assert allocation_row(client, env.allocation_id).preempt_requested is True
    poll = client.get(f"{base}/preemption", params={"timeout_seconds": "0"}, headers=env.headers)
    assert poll.json() == {"preempt": True}
    assert client.post(f"{base}/ack_preemption", headers=env.headers).json() == {}
    assert allocation_row(client, env.allocation_id).preempt_acked is True


def test_preemption_long_poll_times_out_and_wakes_early(settings: MasterSettings) -> None:
    with live_server(settings) as server, server.client() as http:
        env = make_trial(http, server.state, login_headers(http))
        url = f"/api/v1/allocations/{env.allocation_id}/signals/preemption"

        started = time.monotonic()
        quiet = http.get(url, params={"timeout_seconds": "1"}, headers=env.headers)
        elapsed = time.monotonic() - started
        assert quiet.json() == {"preempt": False}
        assert 0.9 <= elapsed < 5

        result: dict[str, Any] = {}

        def poll() -> None:
            begun = time.monotonic()
            resp = http.get(url, params={"timeout_seconds": "30"}, headers=env.headers)
            result["body"] = resp.json()
            result["elapsed"] = time.monotonic() - begun

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        time.sleep(0.5)
        assert poller.is_alive()
        signal_preemption(server.state.sessions, server.state.notifier, env.allocation_id)
        poller.join(timeout=10)
        assert not poller.is_alive()
        assert result["body"] == {"preempt": True}
        assert result["elapsed"] < 5


# --- all-gather ----------------------------------------------------------------------------------


def test_all_gather_waits_for_every_peer(settings: MasterSettings) -> None:
    with live_server(settings) as server, server.client() as http:
        env = make_trial(http, server.state, login_headers(http))
        url = f"/api/v1/allocations/{env.allocation_id}/all_gather"
        answers: dict[int, Any] = {}

        def peer(rank: int) -> None:
            body = {
                "allocationId": env.allocation_id,
                "requestUuid": f"uuid-{rank}",
                "numPeers": 2,
                "data": {"rank": rank, "rendezvous_ip": f"10.0.0.{rank}", "slots": 1},
            }
            answers[rank] = http.post(url, json=body, headers=env.headers).json()

        first = threading.Thread(target=peer, args=(0,), daemon=True)
        first.start()
        time.sleep(0.3)
        assert first.is_alive()  # waits for its peer
        second = threading.Thread(target=peer, args=(1,), daemon=True)
        second.start()
        first.join(timeout=10)
        second.join(timeout=10)
        assert answers[0] == answers[1]
        assert sorted(d["rank"] for d in answers[0]["data"]) == [0, 1]


def test_notify_container_running_marks_the_allocation_running(
    client: TestClient, env: TrialEnv
) -> None:
    body = {
        "allocationId": env.allocation_id,
        "requestUuid": "u1",
        "numPeers": 1,
        "rank": 0,
        "nodeName": "n",
        "data": {},
    }
    resp = client.post(
        f"/api/v1/allocations/{env.allocation_id}/notify_container_running",
        json=body,
        headers=env.headers,
    )
    assert resp.status_code == 200
    assert resp.json() == {"data": [{}]}
    assert allocation_row(client, env.allocation_id).state == "RUNNING"


def test_all_gather_round_semantics() -> None:
    async def scenario() -> None:
        gather = AllGather()
        assert await gather.gather("k", "a", 1, 1, timeout=1) == [1]
        assert await gather.gather("k", "a", 1, 1, timeout=1) == [1]  # a retry
        assert await gather.gather("k", "b", 1, 2, timeout=1) == [2]  # the next round
        with pytest.raises(FailedPreconditionError, match="timed out"):
            await gather.gather("j", "x", 2, 0, timeout=0.05)
        with pytest.raises(InvalidArgumentError):
            await gather.gather("j", "y", 3, 0, timeout=0.05)

    asyncio.run(scenario())


def test_allocation_state_changes_go_through_transitions(client: TestClient, env: TrialEnv) -> None:
    with master_state(client).sessions() as session:
        row = session.get(Allocation, env.allocation_id)
        assert row is not None
        set_allocation_state(session, row, "TERMINATED")
        session.commit()
    url = f"/api/v1/allocations/{env.allocation_id}/notify_container_running"
    body = {"requestUuid": "u1", "numPeers": 1, "data": {}}
    assert client.post(url, json=body, headers=env.headers).status_code == 200
    assert allocation_row(client, env.allocation_id).state == "TERMINATED"
