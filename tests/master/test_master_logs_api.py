"""The master's own log: the in-memory ring (:mod:`stalwart.master.logring`) and
``GET /api/v1/master/logs`` (offset, limit, tail, follow over real chunked HTTP, auth)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.logring import LogRing, level_name
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import live_server, login_headers, master_state

WAIT_S = 10.0
LOGGER = "stalwart.tests.master_logs"
NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def entries(resp: httpx.Response) -> list[dict[str, Any]]:
    """The ``logEntry`` of each NDJSON line (no blank lines, each ends in a newline)."""
    assert resp.status_code == 200, resp.text
    lines = resp.text.split("\n")
    assert lines[-1] == ""
    assert all(lines[:-1]), "blank line in the stream"
    return [json.loads(line)["result"]["logEntry"] for line in lines[:-1]]


def master_logs(client: TestClient, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    return entries(client.get("/api/v1/master/logs", params=params, headers=headers))


def log_lines(tag: str, count: int) -> list[str]:
    """Log ``count`` WARNING records (WARNING passes the default levels) and return their
    messages as the ring keeps them."""
    for i in range(count):
        logging.getLogger(LOGGER).warning("%s line %d", tag, i)
    return [f"{LOGGER}: {tag} line {i}" for i in range(count)]


# -- the ring ----------------------------------------------------------------------------------


def test_ring_offsets_limits_and_eviction() -> None:
    ring = LogRing(capacity=3)
    assert ring.read() == []
    assert ring.read(-5) == []
    for i in range(5):
        ring.append(NOW, "LOG_LEVEL_INFO", f"m{i}")
    assert ring.last_id == 5
    assert [e.id for e in ring.read()] == [3, 4, 5]  # the two oldest were evicted
    assert [e.message for e in ring.read(-2)] == ["m3", "m4"]
    assert [e.id for e in ring.read(-10)] == [3, 4, 5]
    assert [e.id for e in ring.read(1)] == [3, 4, 5]  # offset in the evicted part: what is kept
    assert [e.id for e in ring.read(3)] == [4, 5]
    assert ring.read(5) == []
    assert ring.read(50) == []
    assert [e.id for e in ring.read(0, limit=2)] == [3, 4]
    assert [e.id for e in ring.read(-2, limit=1)] == [4]
    assert [e.id for e in ring.after(4)] == [5]
    with pytest.raises(ValueError, match="capacity"):
        LogRing(capacity=0)


def test_ring_as_a_handler_formats_levels_and_tracebacks() -> None:
    ring = LogRing()
    logger = logging.getLogger(f"{LOGGER}.handler")
    with ring.attached(logger):
        logger.error("plain %s", "args")
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logger.exception("it failed")
    logger.error("after detaching")
    first, second = ring.read()
    assert (first.id, first.level, first.message) == (
        1,
        "LOG_LEVEL_ERROR",
        f"{logger.name}: plain args",
    )
    assert first.timestamp.tzinfo is not None
    assert second.message.startswith(f"{logger.name}: it failed\nTraceback")
    assert "RuntimeError: boom" in second.message
    assert [level_name(n) for n in (5, 10, 20, 25, 30, 40, 50)] == [
        "LOG_LEVEL_TRACE",
        "LOG_LEVEL_DEBUG",
        "LOG_LEVEL_INFO",
        "LOG_LEVEL_INFO",
        "LOG_LEVEL_WARNING",
        "LOG_LEVEL_ERROR",
        "LOG_LEVEL_CRITICAL",
    ]


def test_ring_wait_after_is_woken_from_another_thread() -> None:
    ring = LogRing()

    async def scenario() -> tuple[bool, bool, bool, float]:
        assert ring.last_id == 0
        quiet = await ring.wait_after(0, 0.05)
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        loop.call_later(0.1, lambda: loop.run_in_executor(None, ring.append, NOW, "x", "y"))
        woken = await ring.wait_after(0, WAIT_S)
        waited = time.monotonic() - start
        already = await ring.wait_after(0, WAIT_S)  # an entry is there: at once
        return quiet, woken, already, waited

    quiet, woken, already, waited = asyncio.run(scenario())
    assert (quiet, woken, already) == (False, True, True)
    assert waited < WAIT_S / 2


# -- the endpoint ------------------------------------------------------------------------------


def test_master_logs_needs_a_logged_in_user(client: TestClient) -> None:
    resp = client.get("/api/v1/master/logs")
    assert resp.status_code == 401
    assert resp.json()["error"]["reason"] == "Unauthenticated"


def test_master_logs_offset_limit_and_tail(client: TestClient, admin: dict[str, str]) -> None:
    tag = uuid.uuid4().hex
    mine = log_lines(tag, 5)
    every = master_logs(client, admin)
    assert [e["message"] for e in every[-5:]] == mine
    ids = [e["id"] for e in every]
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(ids)
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    last = every[-1]
    assert last["level"] == "LOG_LEVEL_WARNING"
    assert dt.datetime.fromisoformat(last["timestamp"].replace("Z", "+00:00")).tzinfo is not None
    assert set(last) == {"id", "timestamp", "level", "message"}

    tail = master_logs(client, admin, offset=-2)  # what `det master logs --tail 2` sends
    assert [e["message"] for e in tail] == mine[-2:]
    assert master_logs(client, admin, offset=-100) == every
    assert master_logs(client, admin, limit=2) == every[:2]
    skipped = master_logs(client, admin, offset=every[-3]["id"])  # skip up to that id
    assert [e["message"] for e in skipped] == mine[-2:]
    assert master_logs(client, admin, offset=every[-4]["id"], limit=1) == every[-3:-2]
    assert master_logs(client, admin, offset=every[-1]["id"]) == []
    assert master_logs(client, admin, follow="false", offset=-1) == every[-1:]

    bad = client.get("/api/v1/master/logs", params={"limit": -1}, headers=admin)
    assert bad.status_code == 400
    assert "limit" in bad.json()["error"]["error"]


def test_master_logs_keeps_the_masters_info_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the ``stalwart`` loggers at INFO (as ``stalwart master`` sets them), the ring holds
    the master's start-up record; each master has its own ring and ids from 1."""
    settings = make_settings(tmp_path / "home")
    with (
        caplog.at_level(logging.INFO, logger="stalwart"),
        TestClient(create_app(settings, run_cluster=False)) as client,
    ):
        state = master_state(client)
        admin = login_headers(client)
        found = master_logs(client, admin)
        assert found[0]["id"] == 1
        assert found[0]["level"] == "LOG_LEVEL_INFO"
        assert found[0]["message"].startswith("stalwart.master: Stalwart ")
        assert f"master {state.master_id} serving cluster {state.cluster_id}" in found[0]["message"]
        ring = state.log_ring
    assert ring not in logging.getLogger().handlers  # detached when the master stops


def test_follow_streams_records_logged_after_the_request(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    tag = uuid.uuid4().hex
    with live_server(settings) as server, server.client() as http:
        admin = login_headers(http)
        before = log_lines(f"{tag}-before", 1)[0]
        timeout = httpx.Timeout(WAIT_S)
        params: dict[str, str | int] = {"follow": "true", "offset": -1}
        with http.stream(
            "GET", "/api/v1/master/logs", params=params, headers=admin, timeout=timeout
        ) as resp:
            assert resp.status_code == 200
            assert resp.headers.get("transfer-encoding") == "chunked"
            lines = resp.iter_lines()
            first = json.loads(next(lines))["result"]["logEntry"]
            assert first["message"] == before
            after = log_lines(f"{tag}-after", 2)
            seen: list[str] = []
            deadline = time.monotonic() + WAIT_S
            while len(seen) < 2 and time.monotonic() < deadline:
                line = next(lines)
                assert line, "blank line in the stream"
                entry = json.loads(line)["result"]["logEntry"]
                assert entry["id"] > first["id"]
                if tag in entry["message"]:
                    seen.append(entry["message"])
            assert seen == after

        # follow with a limit: the stream ends once that many went out
        later = threading.Timer(0.2, log_lines, args=(f"{tag}-later", 1))
        later.start()
        try:
            done = http.get(
                "/api/v1/master/logs",
                params={"follow": "true", "offset": -1, "limit": 2},
                headers=admin,
                timeout=timeout,
            )
        finally:
            later.join()
        assert [e["message"] for e in entries(done)] == [after[-1], f"{LOGGER}: {tag}-later line 0"]
