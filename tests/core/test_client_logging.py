"""The harness's own requests leave no httpx/httpcore log records, at any level the script
configures, while the script's own httpx requests keep theirs (a real HTTP server on
loopback, so httpcore's connection traces run too)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from stalwart.core._client import Session
from stalwart.core._httplog import HTTP_LOGGERS


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the client's log, not the server's."""


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(autouse=True)
def _http_loggers_as_a_script_finds_them() -> Iterator[None]:
    """httpx's and httpcore's loggers as in a fresh training script (no level of their own,
    enabled): other code in this test process (an agent's or a task helper's setup) may have
    quietened them, which is its business, not this test's. Restored afterwards."""
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore", *HTTP_LOGGERS)]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.NOTSET)
        lg.disabled = False
    try:
        yield
    finally:
        for lg, level, disabled in saved:
            lg.setLevel(level)
            lg.disabled = disabled


def _http_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.split(".")[0] in ("httpx", "httpcore")]


@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO])
def test_harness_requests_log_nothing_the_users_requests_do(
    url: str, caplog: pytest.LogCaptureFixture, level: int
) -> None:
    caplog.set_level(level)  # as logging.basicConfig(level=...) in a training script
    session = Session(url, "tok")
    session.post("/api/v1/trials/1/metrics/batch", {"metrics": []})
    session.get("/api/v1/allocations/a/signals/preemption")
    session.close()
    assert _http_records(caplog) == []

    httpx.get(f"{url}/mine").raise_for_status()  # the script's own request
    mine = _http_records(caplog)
    assert any(r.name == "httpx" and "/mine" in r.getMessage() for r in mine)
    if level == logging.DEBUG:
        assert any(r.name.startswith("httpcore.") for r in mine)


def test_a_users_request_in_another_thread_keeps_its_lines(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    session = Session(url, "tok")
    done = threading.Event()

    def harness() -> None:
        for _ in range(20):
            session.post("/api/v1/trials/1/metrics/batch", {"metrics": []})
        done.set()

    thread = threading.Thread(target=harness)
    thread.start()
    with httpx.Client() as client:
        for n in range(5):
            client.get(f"{url}/mine/{n}").raise_for_status()
    assert done.wait(30)
    thread.join(5)
    session.close()
    messages = [r.getMessage() for r in _http_records(caplog)]
    assert len(messages) == 5
    assert all("/mine/" in m for m in messages)
