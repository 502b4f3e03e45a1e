"""Task logs: ``ship_logs.py``'s posts, trial / task log streams (head, tail, filters, follow
over real chunked HTTP) and the ``logs/fields`` streams."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.db.tables import Trial
from stalwart.master.services import logs as log_service
from stalwart.master.state import MasterState
from stalwart.master.transitions import set_trial_state
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import (
    TrialEnv,
    live_server,
    login_headers,
    make_trial,
    master_state,
)

WAIT_S = 10.0


def ship(env: TrialEnv, text: str, **extra: Any) -> dict[str, Any]:
    """One line as ``ship_logs.py`` sends it (snake_case keys)."""
    line = {
        "timestamp": "2025-03-01T12:00:00.500000+00:00",
        "log": text,
        "stdtype": "stdout",
        "source": "task",
        "task_id": env.task_id,
        "allocation_id": env.allocation_id,
        "container_id": "abcdef1234567890",
        "agent_id": "agent-a",
    }
    line.update(extra)
    return line


def post(http: httpx.Client, env: TrialEnv, lines: list[dict[str, Any]]) -> httpx.Response:
    body = json.dumps({"logs": lines}).encode()
    return http.post("/api/v1/task/logs", content=body, headers=env.headers)  # no Content-Type


def ndjson(resp: httpx.Response) -> list[dict[str, Any]]:
    assert resp.status_code == 200, resp.text
    lines = resp.text.split("\n")
    assert lines[-1] == ""  # every line ends in a newline
    assert all(lines[:-1]), "blank line in the stream"
    return [json.loads(line)["result"] for line in lines[:-1]]


def trial_logs(
    client: TestClient, env: TrialEnv, headers: dict[str, str], **params: Any
) -> list[dict[str, Any]]:
    params.setdefault("follow", "false")
    resp = client.get(f"/api/v1/trials/{env.trial_id}/logs", params=params, headers=headers)
    return ndjson(resp)


@pytest.fixture
def env(client: TestClient, admin: dict[str, str]) -> TrialEnv:
    return make_trial(client, master_state(client), admin)


@pytest.fixture
def shipped(client: TestClient, env: TrialEnv) -> TrialEnv:
    lines = [
        ship(env, "INFO: [12] starting\n", rank_id=0, level="LOG_LEVEL_INFO"),
        ship(env, "plain print\n", rank_id=1, container_id=None, agent_id="agent-b"),
        ship(
            env,
            "WARNING: careful 100%_done\n",
            rank_id=1,
            level="LOG_LEVEL_WARNING",
            timestamp="2025-03-01T12:00:05+00:00",
        ),
        ship(env, "Traceback\n", stdtype="stderr", level="ERROR", timestamp="2025-03-01T12:00:09Z"),
    ]
    assert post(client, env, lines).status_code == 200
    return env


def test_trial_logs_have_required_keys_and_determined_messages(
    client: TestClient, shipped: TrialEnv, admin: dict[str, str]
) -> None:
    logs = trial_logs(client, shipped, admin)
    assert len(logs) == 4
    for entry in logs:
        for key in ("id", "trialId", "timestamp", "level", "message"):
            assert key in entry, key
        assert isinstance(entry["id"], str)
        assert entry["trialId"] == shipped.trial_id
        assert entry["message"].endswith("\n")
    first, second, third, fourth = logs
    assert first["message"] == (
        "[2025-03-01T12:00:00.500000Z] abcdef12 [rank=0] || INFO: INFO: [12] starting\n"
    )
    assert first["level"] == "LOG_LEVEL_INFO"
    assert first["timestamp"] == "2025-03-01T12:00:00.500000Z"
    assert second["message"] == "[2025-03-01T12:00:00.500000Z]          [rank=1] || plain print\n"
    assert second["level"] == "LOG_LEVEL_UNSPECIFIED"
    assert second["containerId"] is None
    assert third["rankId"] == 1
    assert fourth["level"] == "LOG_LEVEL_ERROR"
    assert fourth["stdtype"] == "stderr"
    assert [int(e["id"]) for e in logs] == sorted(int(e["id"]) for e in logs)


def test_head_and_tail(client: TestClient, shipped: TrialEnv, admin: dict[str, str]) -> None:
    head = trial_logs(client, shipped, admin, limit=2)
    assert [e["log"] for e in head] == ["INFO: [12] starting\n", "plain print\n"]
    tail = trial_logs(client, shipped, admin, limit=2, orderBy="ORDER_BY_DESC")
    assert [e["log"] for e in tail] == ["Traceback\n", "WARNING: careful 100%_done\n"]
    everything_newest_first = trial_logs(client, shipped, admin, orderBy="ORDER_BY_DESC")
    assert len(everything_newest_first) == 4


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"rankIds": ["1"]}, ["plain print\n", "WARNING: careful 100%_done\n"]),
        ({"rankIds": ["-1"]}, ["Traceback\n"]),
        ({"rankIds": ["0", "-1"]}, ["INFO: [12] starting\n", "Traceback\n"]),
        (
            {"levels": ["LOG_LEVEL_WARNING", "LOG_LEVEL_ERROR"]},
            ["WARNING: careful 100%_done\n", "Traceback\n"],
        ),
        ({"stdtypes": "stderr"}, ["Traceback\n"]),
        ({"sources": "agent"}, []),
        ({"agentIds": "agent-b"}, ["plain print\n"]),
        (
            {"containerIds": "abcdef1234567890", "stdtypes": "stdout"},
            ["INFO: [12] starting\n", "WARNING: careful 100%_done\n"],
        ),
        ({"searchText": "100%_"}, ["WARNING: careful 100%_done\n"]),
        ({"searchText": "0%x"}, []),
        (
            {"timestampAfter": "2025-03-01T12:00:00.500000Z"},
            ["WARNING: careful 100%_done\n", "Traceback\n"],
        ),
        (
            {"timestampBefore": "2025-03-01T12:00:05Z"},
            ["INFO: [12] starting\n", "plain print\n", "WARNING: careful 100%_done\n"],
        ),
    ],
)
def test_filters(
    client: TestClient,
    shipped: TrialEnv,
    admin: dict[str, str],
    params: dict[str, Any],
    expected: list[str],
) -> None:
    assert [e["log"] for e in trial_logs(client, shipped, admin, **params)] == expected


def test_task_logs_and_allocation_filter(
    client: TestClient, shipped: TrialEnv, admin: dict[str, str]
) -> None:
    resp = client.get(f"/api/v1/tasks/{shipped.task_id}/logs", headers=admin)
    logs = ndjson(resp)
    assert len(logs) == 4
    for entry in logs:
        for key in ("id", "taskId", "timestamp", "level", "message", "log"):
            assert key in entry, key
        assert entry["taskId"] == shipped.task_id
        assert entry["allocationId"] == shipped.allocation_id
    other = client.get(
        f"/api/v1/tasks/{shipped.task_id}/logs",
        params={"allocationIds": "someone-else.1"},
        headers=admin,
    )
    assert ndjson(other) == []


def test_log_fields(client: TestClient, shipped: TrialEnv, admin: dict[str, str]) -> None:
    (trial_fields,) = ndjson(
        client.get(f"/api/v1/trials/{shipped.trial_id}/logs/fields", headers=admin)
    )
    assert trial_fields == {
        "agentIds": ["agent-a", "agent-b"],
        "containerIds": ["abcdef1234567890"],
        "rankIds": [0, 1],
        "stdtypes": ["stderr", "stdout"],
        "sources": ["task"],
    }
    (task_fields,) = ndjson(
        client.get(f"/api/v1/tasks/{shipped.task_id}/logs/fields", headers=admin)
    )
    assert task_fields["allocationIds"] == [shipped.allocation_id]


def test_streams_are_chunked_json(
    client: TestClient, shipped: TrialEnv, admin: dict[str, str]
) -> None:
    resp = client.get(f"/api/v1/trials/{shipped.trial_id}/logs", headers=admin)
    assert "content-length" not in resp.headers


def test_post_rules(client: TestClient, env: TrialEnv, admin: dict[str, str]) -> None:
    other = make_trial(client, master_state(client), admin)
    assert client.post("/api/v1/task/logs", json={"logs": [ship(env, "x\n")]}).status_code == 401
    assert post(client, other, [ship(env, "x\n")]).status_code == 403
    assert post(client, env, []).status_code == 400
    assert post(client, env, [ship(env, "x\n", level="LOG_LEVEL_LOUD")]).status_code == 400
    assert post(client, env, [ship(env, "x\n", timestamp="yesterday")]).status_code == 400
    unknown = client.post(
        "/api/v1/task/logs", json={"logs": [{"task_id": "nope", "log": "x\n"}]}, headers=admin
    )
    assert unknown.status_code == 404
    camel = {
        "logs": [{"taskId": env.task_id, "log": "camel\n", "rankId": 3, "level": "LOG_LEVEL_DEBUG"}]
    }
    assert client.post("/api/v1/task/logs", json=camel, headers=env.headers).status_code == 200
    (entry,) = trial_logs(client, env, admin)
    assert (entry["rankId"], entry["level"]) == (3, "LOG_LEVEL_DEBUG")


def test_read_rules(client: TestClient, shipped: TrialEnv, admin: dict[str, str]) -> None:
    url = f"/api/v1/trials/{shipped.trial_id}/logs"
    assert client.get(url).status_code == 401
    assert client.get(url, params={"follow": "true", "limit": 3}, headers=admin).status_code == 400
    assert client.get(url, params={"limit": -1}, headers=admin).status_code == 400
    assert client.get(url, params={"levels": "LOG_LEVEL_NOPE"}, headers=admin).status_code == 400
    assert client.get(url, params={"timestampAfter": "soon"}, headers=admin).status_code == 400
    assert client.get(url, params={"enableRegex": "true"}, headers=admin).status_code == 400
    assert client.get("/api/v1/trials/999/logs", headers=admin).status_code == 404
    assert client.get("/api/v1/tasks/nope/logs", headers=admin).status_code == 404
    assert client.get("/api/v1/trials/999/logs/fields", headers=admin).status_code == 404


def test_batches_over_the_limit_are_413(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", limits={"max_log_batch": 3})
    with TestClient(create_app(settings, run_cluster=False)) as small:
        headers = login_headers(small)
        env = make_trial(small, master_state(small), headers)
        assert post(small, env, [ship(env, f"{i}\n") for i in range(3)]).status_code == 200
        too_many = post(small, env, [ship(env, f"{i}\n") for i in range(4)])
        assert too_many.status_code == 413
        assert "max_log_batch" in too_many.json()["message"]


def test_the_service_reads_in_pages(client: TestClient, env: TrialEnv) -> None:
    lines = [ship(env, f"line {i}\n") for i in range(7)]
    assert post(client, env, lines).status_code == 200
    state = master_state(client)

    async def collect(**kwargs: Any) -> list[str]:
        stream = log_service.stream_logs(
            state.sessions,
            state.notifier,
            env.task_id,
            log_service.LogFilter(),
            is_terminal=lambda _session: True,
            page_size=2,
            **kwargs,
        )
        return [record.log async for record in stream]

    assert asyncio.run(collect()) == [f"line {i}\n" for i in range(7)]
    assert asyncio.run(collect(limit=5)) == [f"line {i}\n" for i in range(5)]
    assert asyncio.run(collect(limit=3, descending=True)) == ["line 6\n", "line 5\n", "line 4\n"]
    assert asyncio.run(collect(follow=True)) == [f"line {i}\n" for i in range(7)]


# --- follow over a real server -------------------------------------------------------------------


def _reader(url: str, path: str, headers: dict[str, str], out: queue.Queue[Any]) -> None:
    try:
        with (
            httpx.Client(base_url=url, timeout=httpx.Timeout(30.0)) as http,
            http.stream("GET", path, params={"follow": "true"}, headers=headers) as resp,
        ):
            out.put(("headers", resp.status_code, dict(resp.headers)))
            for line in resp.iter_lines():
                out.put(("line", line))
        out.put(("end",))
    except Exception as exc:  # surfaced by the test through the queue
        out.put(("error", repr(exc)))


def _next(out: queue.Queue[Any]) -> Any:
    try:
        return out.get(timeout=WAIT_S)
    except queue.Empty:
        pytest.fail(f"nothing arrived within {WAIT_S}s")


def _end_trial(state: MasterState, trial_id: int) -> None:
    with state.sessions() as session:
        trial = session.get(Trial, trial_id)
        assert trial is not None
        set_trial_state(session, trial, "COMPLETED")
        session.commit()


def test_follow_streams_new_lines_and_ends_with_the_trial(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    with live_server(settings) as server, server.client() as http:
        admin = login_headers(http)
        env = make_trial(http, server.state, admin)
        assert post(http, env, [ship(env, "one\n"), ship(env, "two\n")]).status_code == 200

        out: queue.Queue[Any] = queue.Queue()
        reader = threading.Thread(
            target=_reader,
            args=(server.url, f"/api/v1/trials/{env.trial_id}/logs", admin, out),
            daemon=True,
        )
        reader.start()
        kind, status, headers = _next(out)
        assert (kind, status) == ("headers", 200)
        assert headers.get("transfer-encoding") == "chunked"
        for expected in ("one\n", "two\n"):
            kind, line = _next(out)
            assert kind == "line"
            assert line
            assert json.loads(line)["result"]["log"] == expected
        assert out.empty()
        assert reader.is_alive()  # still open: the trial runs

        assert post(http, env, [ship(env, "three\n")]).status_code == 200
        _kind, line = _next(out)
        assert json.loads(line)["result"]["message"].endswith("three\n")
        assert reader.is_alive()

        _end_trial(server.state, env.trial_id)
        assert _next(out) == ("end",)
        reader.join(timeout=WAIT_S)
        assert not reader.is_alive()


def test_follow_fields_ends_with_the_trial(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    with live_server(settings) as server, server.client() as http:
        admin = login_headers(http)
        env = make_trial(http, server.state, admin)
        out: queue.Queue[Any] = queue.Queue()
        reader = threading.Thread(
            target=_reader,
            args=(server.url, f"/api/v1/tasks/{env.task_id}/logs/fields", admin, out),
            daemon=True,
        )
        reader.start()
        assert _next(out)[0] == "headers"
        _kind, line = _next(out)
        assert json.loads(line)["result"]["agentIds"] == []
        assert post(http, env, [ship(env, "x\n", agent_id="agent-z")]).status_code == 200
        _kind, line = _next(out)
        assert json.loads(line)["result"]["agentIds"] == ["agent-z"]
        _end_trial(server.state, env.trial_id)
        assert _next(out) == ("end",)
        reader.join(timeout=WAIT_S)


def test_log_policies_label_the_trial_from_its_nodes_lines(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    """Determined's default policies label a trial whose node logged a CUDA out-of-memory line;
    the printed experiment config (which holds the patterns) and lines with no node do not."""

    def label() -> object:
        trial = client.get(f"/api/v1/trials/{env.trial_id}", headers=admin).json()["trial"]
        return trial.get("logPolicyMatched")

    config_line = '{"log_policies": [{"pattern": ".*CUDA out of memory.*"}]}\n'
    assert post(client, env, [ship(env, config_line)]).status_code == 200
    no_node = ship(env, "CUDA out of memory\n", agent_id=None)
    assert post(client, env, [no_node]).status_code == 200
    assert label() is None
    oom = ship(env, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert post(client, env, [oom]).status_code == 200
    assert label() == "CUDA OOM"
    ecc = ship(env, "uncorrectable ECC error encountered\n")
    assert post(client, env, [ecc]).status_code == 200
    assert label() == "ECC Error"  # the last match wins, as in Determined
    listed = client.get(f"/api/v1/experiments/{env.experiment_id}/trials", headers=admin).json()
    assert [t.get("logPolicyMatched") for t in listed["trials"]] == ["ECC Error"]
