"""Log search, filters and download over real HTTP (uvicorn), on SQLite and on PostgreSQL:
every filter of ``GET /api/v1/trials/{id}/logs`` and ``GET /api/v1/tasks/{id}/logs`` (with and
without ``follow``), and the UI's plain-text download with the same filters."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart.master.db.tables import Trial
from stalwart.master.services import logs as log_service
from stalwart.master.transitions import set_trial_state
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import (
    CONFIG,
    LiveServer,
    TrialEnv,
    live_server,
    login_headers,
)
from tests.master.test_allocations_api import make_trial as new_trial
from tests.master.test_logs_api import WAIT_S, post, ship

LINES: list[dict[str, Any]] = [
    {"log": "INFO: epoch 1 Loss 0.5\n", "rank_id": 0, "level": "LOG_LEVEL_INFO"},
    {"log": "plain print loss\n", "rank_id": 1, "agent_id": "agent-b", "container_id": None},
    {
        "log": "WARNING: 100%_done\n",
        "rank_id": 1,
        "level": "LOG_LEVEL_WARNING",
        "timestamp": "2025-03-01T12:00:05+00:00",
    },
    {
        "log": "RuntimeError: CUDA out of memory\n",
        "stdtype": "stderr",
        "level": "ERROR",
        "source": "agent",
        "timestamp": "2025-03-01T12:00:09Z",
    },
]


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    extra = {"db": request.getfixturevalue("pg_url")} if request.param == "postgresql" else {}
    with live_server(make_settings(tmp_path / "home", **extra)) as running:
        yield running


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        client.headers.update(login_headers(client))
        yield client


@pytest.fixture
def env(server: LiveServer, http: httpx.Client) -> TrialEnv:
    env = new_trial(http, server.state, dict(http.headers))
    assert post(http, env, [ship(env, line.pop("log"), **line) for line in _lines()]).is_success
    return env


def _lines() -> list[dict[str, Any]]:
    return [dict(line) for line in LINES]


def _logs(http: httpx.Client, path: str, params: dict[str, Any]) -> list[str]:
    resp = http.get(path, params=params)
    assert resp.status_code == 200, resp.text
    return [json.loads(line)["result"]["log"] for line in resp.text.splitlines()]


FILTERS: list[tuple[dict[str, Any], list[int]]] = [
    ({"searchText": "loss"}, [1]),  # case-sensitive: "Loss" does not match
    ({"searchText": "Loss"}, [0]),
    ({"searchText": "100%_"}, [2]),  # literal: % and _ are no wildcards
    ({"searchText": "0%x"}, []),
    ({"levels": ["LOG_LEVEL_WARNING", "LOG_LEVEL_ERROR"]}, [2, 3]),
    ({"levels": "LOG_LEVEL_UNSPECIFIED"}, [1]),
    ({"rankIds": ["1"]}, [1, 2]),
    ({"rankIds": ["-1"]}, [3]),
    ({"agentIds": "agent-b"}, [1]),
    ({"containerIds": "abcdef1234567890"}, [0, 2, 3]),
    ({"stdtypes": "stderr"}, [3]),
    ({"sources": "agent"}, [3]),
    ({"timestampAfter": "2025-03-01T12:00:00.500000Z"}, [2, 3]),
    ({"timestampBefore": "2025-03-01T12:00:05Z"}, [0, 1, 2]),
    ({"searchText": "o", "rankIds": "1", "levels": "LOG_LEVEL_WARNING"}, [2]),
    ({"limit": 2, "orderBy": "ORDER_BY_DESC", "searchText": "o"}, [3, 2]),
]


@pytest.mark.parametrize(("params", "expected"), FILTERS)
def test_every_filter_on_trial_and_task_logs(
    http: httpx.Client, env: TrialEnv, params: dict[str, Any], expected: list[int]
) -> None:
    want = [LINES[i]["log"] for i in expected]
    assert _logs(http, f"/api/v1/trials/{env.trial_id}/logs", params) == want
    assert _logs(http, f"/api/v1/tasks/{env.task_id}/logs", params) == want
    with_alloc = {**params, "allocationIds": env.allocation_id}
    assert _logs(http, f"/api/v1/tasks/{env.task_id}/logs", with_alloc) == want


def _follow(
    url: str, path: str, params: dict[str, Any], headers: dict[str, str]
) -> queue.Queue[Any]:
    out: queue.Queue[Any] = queue.Queue()

    def read() -> None:
        try:
            with (
                httpx.Client(base_url=url, timeout=httpx.Timeout(30.0)) as client,
                client.stream(
                    "GET", path, params={**params, "follow": "true"}, headers=headers
                ) as resp,
            ):
                for line in resp.iter_lines():
                    out.put(json.loads(line)["result"]["log"])
            out.put(None)
        except Exception as exc:  # surfaced through the queue
            out.put(exc)

    threading.Thread(target=read, daemon=True).start()
    return out


def _take(out: queue.Queue[Any]) -> Any:
    try:
        item = out.get(timeout=WAIT_S)
    except queue.Empty:
        pytest.fail(f"nothing arrived within {WAIT_S}s")
    assert not isinstance(item, Exception), item
    return item


def test_follow_applies_search_and_filters_to_new_lines(
    server: LiveServer, http: httpx.Client, env: TrialEnv
) -> None:
    headers = dict(http.headers)
    filters = {"searchText": "OOM", "stdtypes": "stderr"}
    streams = [
        _follow(server.url, f"/api/v1/trials/{env.trial_id}/logs", filters, headers),
        _follow(server.url, f"/api/v1/tasks/{env.task_id}/logs", filters, headers),
    ]
    new = [
        ship(env, "CUDA OOM on stdout\n"),
        ship(env, "no match on stderr\n", stdtype="stderr"),
        ship(env, "CUDA OOM again\n", stdtype="stderr"),
    ]
    assert post(http, env, new).is_success
    for out in streams:
        assert _take(out) == "CUDA OOM again\n"
    with server.state.sessions() as session:
        trial = session.get(Trial, env.trial_id)
        assert trial is not None
        set_trial_state(session, trial, "COMPLETED")
        session.commit()
    for out in streams:
        assert _take(out) is None  # the follow ended with the trial, nothing else matched
        assert out.empty()


def _download(http: httpx.Client, path: str, params: dict[str, Any]) -> httpx.Response:
    resp = http.get(path, params=params)
    assert resp.status_code == 200, resp.text
    return resp


def test_download_is_plain_text_with_timestamps_levels_and_ranks(
    http: httpx.Client, env: TrialEnv
) -> None:
    resp = _download(http, f"/api/v1/ui/trials/{env.trial_id}/logs/download", {})
    assert resp.headers["content-type"] == "text/plain; charset=utf-8"
    assert resp.headers["content-disposition"] == (
        f"attachment; filename=trial-{env.trial_id}-logs.txt"
    )
    assert "content-length" not in resp.headers  # streamed
    assert resp.text.splitlines() == [
        "2025-03-01T12:00:00.500000Z INFO rank=0 INFO: epoch 1 Loss 0.5",
        "2025-03-01T12:00:00.500000Z - rank=1 plain print loss",
        "2025-03-01T12:00:05.000000Z WARNING rank=1 WARNING: 100%_done",
        "2025-03-01T12:00:09.000000Z ERROR - RuntimeError: CUDA out of memory",
    ]
    task = _download(http, f"/api/v1/ui/tasks/{env.task_id}/logs/download", {})
    assert task.text == resp.text
    assert task.headers["content-disposition"] == (
        f"attachment; filename=task-{env.task_id}-logs.txt"
    )


@pytest.mark.parametrize(("params", "expected"), FILTERS)
def test_download_honours_the_filters(
    http: httpx.Client, env: TrialEnv, params: dict[str, Any], expected: list[int]
) -> None:
    want = [LINES[i]["log"].rstrip("\n") for i in expected]
    for path in (
        f"/api/v1/ui/trials/{env.trial_id}/logs/download",
        f"/api/v1/ui/tasks/{env.task_id}/logs/download",
    ):
        got = _download(http, path, params).text.splitlines()
        assert [line.split(" ", 3)[3] for line in got] == want


def test_download_keeps_each_entry_on_one_line_and_masks_secrets(
    server: LiveServer, http: httpx.Client
) -> None:
    secret = "s3cr3t-value-of-the-run"
    config = f"{CONFIG}environment:\n  environment_variables:\n    - API_TOKEN={secret}\n"
    env = new_trial(http, server.state, dict(http.headers), config=config)
    lines = [ship(env, "first\nsecond\r\n"), ship(env, f"token {secret} leaked\n")]
    assert post(http, env, lines).is_success
    text = _download(http, f"/api/v1/ui/trials/{env.trial_id}/logs/download", {}).text
    assert text.splitlines()[0].endswith(" - - first\\nsecond")
    assert secret not in text
    assert text.splitlines()[1].endswith(" - - token ******** leaked")
    assert len(text.splitlines()) == 2


def test_download_needs_the_same_rights_as_the_logs(
    server: LiveServer, http: httpx.Client, env: TrialEnv
) -> None:
    path = f"/api/v1/ui/trials/{env.trial_id}/logs/download"
    with server.client() as anonymous:
        assert anonymous.get(path).status_code == 401
        assert anonymous.get(f"/api/v1/trials/{env.trial_id}/logs").status_code == 401
        task = anonymous.get(
            path, headers={"Grpc-Metadata-x-allocation-token": f"Bearer {env.token}"}
        )
        assert task.status_code == 403
    assert http.get("/api/v1/ui/trials/999999/logs/download").status_code == 404
    assert http.get("/api/v1/ui/tasks/nope/logs/download").status_code == 404
    bad = http.get(path, params={"levels": "LOUD"})
    assert bad.status_code == 400
    assert "LOUD" in bad.text


def test_download_streams_past_one_page(
    server: LiveServer, http: httpx.Client, env: TrialEnv
) -> None:
    count = log_service.PAGE_SIZE * 2 + 5  # three pages of the reader
    lines = [ship(env, f"bulk {n:05d}\n", rank_id=n % 4) for n in range(count)]
    assert post(http, env, lines).is_success
    path = f"/api/v1/ui/trials/{env.trial_id}/logs/download"
    with http.stream("GET", path, params={"searchText": "bulk "}) as resp:
        assert resp.status_code == 200
        assert resp.headers.get("transfer-encoding") == "chunked"
        got = [line.rsplit(" ", 1)[1] for line in resp.iter_lines()]
    assert got == [f"{n:05d}" for n in range(count)]
    tail = _download(http, path, {"limit": 3, "orderBy": "ORDER_BY_DESC", "rankIds": "1"})
    assert [line.rsplit(" ", 1)[1] for line in tail.text.splitlines()] == [
        f"{n:05d}" for n in (count - 4, count - 8, count - 12)
    ]
