"""The shared retry policy (:mod:`stalwart._retry`) against a real local HTTP server.

The server follows a script per test: answer 503 (with ``Retry-After``), 200 or 404, or reset
the connection (RST) once the request is read. What users rely on: a stopping or restarting
master costs a pause, not an error; a 4xx is never sent twice; the SDK never repeats a POST
that may have reached the master.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from stalwart import errors
from stalwart._retry import (
    RETRY_HEADER,
    RetriesExhaustedError,
    RetryPolicy,
    retry_after,
    send_with_retries,
)
from stalwart.client.auth import ClientEnv, TokenStore
from stalwart.client.session import Session as SdkSession
from stalwart.core._client import MasterUnreachableError, Session
from tests.integration.conftest import free_port

FAST = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05, deadline_s=10.0)


class ScriptedServer:
    """A real HTTP/1.1 server; each request takes the next action of ``script`` (the last one
    repeats): ``503``, ``503:<retry-after>``, ``200``, ``404`` or ``reset``."""

    def __init__(self, *script: str) -> None:
        self.script = list(script)
        self.seen: list[tuple[str, str | None]] = []  # (method, X-Stalwart-Retry)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                outer.seen.append((self.command, self.headers.get(RETRY_HEADER)))
                action = outer.script[min(len(outer.seen), len(outer.script)) - 1]
                if action == "reset":  # RST instead of an answer: the request was sent
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                    return
                status, _, after = action.partition(":")
                body = json.dumps({"message": f"scripted {status}"}).encode()
                self.send_response(int(status))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if after:
                    self.send_header("Retry-After", after)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _any  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[type[ScriptedServer]]:
    made: list[ScriptedServer] = []

    class Made(ScriptedServer):
        def __init__(self, *script: str) -> None:
            super().__init__(*script)
            made.append(self)

    yield Made
    for server in made:
        server.close()


def _send(client: httpx.Client, url: str, method: str = "GET"):  # type: ignore[no-untyped-def]
    def send(attempt: int) -> httpx.Response:
        headers = {RETRY_HEADER: str(attempt)} if attempt else {}
        return client.request(method, url, headers=headers, content=b"{}")

    return send


def test_503_then_200_is_retried_honouring_retry_after(serve: type[ScriptedServer]) -> None:
    server = serve("503:1", "200")
    started = time.monotonic()
    with httpx.Client() as client:
        answer = send_with_retries(_send(client, server.url), method="GET", policy=FAST)
    assert answer.status_code == 200
    assert time.monotonic() - started >= 1.0, "Retry-After: 1 was not honoured"
    assert server.seen == [("GET", None), ("GET", "1")]


def test_retry_after_is_capped(serve: type[ScriptedServer]) -> None:
    server = serve("503:3600", "200")
    capped = RetryPolicy(initial_backoff_s=0.01, max_retry_after_s=0.2, deadline_s=10.0)
    started = time.monotonic()
    with httpx.Client() as client:
        assert send_with_retries(_send(client, server.url), method="GET", policy=capped).is_success
    assert time.monotonic() - started < 2.0


def test_a_reset_connection_is_retried(serve: type[ScriptedServer]) -> None:
    server = serve("reset", "reset", "200")
    with httpx.Client() as client:
        answer = send_with_retries(_send(client, server.url, "POST"), method="POST", policy=FAST)
    assert answer.status_code == 200
    assert [retry for _, retry in server.seen] == [None, "1", "2"]


def test_a_404_is_never_retried(serve: type[ScriptedServer]) -> None:
    server = serve("404", "200")
    with httpx.Client() as client:
        answer = send_with_retries(_send(client, server.url, "POST"), method="POST", policy=FAST)
    assert answer.status_code == 404
    assert len(server.seen) == 1


def test_a_refused_connection_is_retried_until_the_deadline() -> None:
    url = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    policy = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.02, deadline_s=0.3)
    calls: list[int] = []

    def send(attempt: int) -> httpx.Response:
        calls.append(attempt)
        return httpx.get(url)

    started = time.monotonic()
    with pytest.raises(RetriesExhaustedError) as info:
        send_with_retries(send, method="POST", policy=policy)
    assert time.monotonic() - started < 2.0
    assert len(calls) > 2
    assert info.value.response is None
    assert "ConnectError" in info.value.problem


def test_retry_after_reads_seconds_and_dates() -> None:
    def answer(value: str) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": value})

    assert retry_after(answer("2")) == 2.0
    assert retry_after(answer("soon")) is None
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    found = retry_after(answer(later))
    assert found is not None
    assert 25 <= found <= 31


# -- the clients that use it ------------------------------------------------------------------


def test_the_harness_session_retries_503_and_raises_404_at_once(
    serve: type[ScriptedServer],
) -> None:
    server = serve("503:0", "503", "200")
    session = Session(server.url, "tok", retry=FAST)
    try:
        assert session.post("/api/v1/trials/1/metrics", {"x": 1}) == {"message": "scripted 200"}
        assert [retry for _, retry in server.seen] == [None, "1", "2"]
    finally:
        session.close()
    missing = serve("404")
    session = Session(missing.url, "tok", retry=FAST)
    try:
        with pytest.raises(errors.NotFoundError, match="HTTP 404"):
            session.get("/api/v1/nothing")
        assert len(missing.seen) == 1
    finally:
        session.close()


def test_the_harness_session_gives_up_as_master_unreachable(serve: type[ScriptedServer]) -> None:
    server = serve("503")
    policy = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.02, deadline_s=0.3)
    session = Session(server.url, "tok", retry=policy)
    with pytest.raises(MasterUnreachableError, match="last: HTTP 503: scripted 503"):
        session.get("/api/v1/me")
    session.close()


def _sdk(url: str, tmp_path: Path) -> SdkSession:
    env = ClientEnv(master=url)
    store = TokenStore(config_dir=tmp_path)
    session = SdkSession(url, user="admin", password=None, env=env, store=store, retry=FAST)
    session._token = "tok"  # no login round trip against the scripted server
    return session


def test_the_sdk_retries_a_get_but_never_resends_a_post_that_was_sent(
    serve: type[ScriptedServer], tmp_path: Path
) -> None:
    server = serve("503", "200")
    with contextlib.closing(_sdk(server.url, tmp_path)) as sdk:
        assert sdk.request("GET", "/api/v1/me") == {"message": "scripted 200"}
    assert len(server.seen) == 2

    posted = serve("503", "200")
    with (
        contextlib.closing(_sdk(posted.url, tmp_path)) as sdk,
        pytest.raises(errors.StalwartError, match="scripted 503"),
    ):
        sdk.request("POST", "/api/v1/experiments", body={})
    assert len(posted.seen) == 1, "a POST that reached the master was sent twice"

    reset = serve("reset", "200")
    with (
        contextlib.closing(_sdk(reset.url, tmp_path)) as sdk,
        pytest.raises(errors.StalwartError, match="cannot reach the master"),
    ):
        sdk.request("POST", "/api/v1/experiments", body={})
    assert len(reset.seen) == 1
