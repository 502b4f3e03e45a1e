"""ASGI middleware: ``Server-Timing: app;dur=<ms>, cpu;dur=<ms>`` on every ``/api/`` answer.

``app`` is the master's own wall time from receiving the request to starting the answer
(routing, the route, its queries and serializing a whole body; for a stream, until its
headers); ``cpu`` is the CPU time the master's process spent meanwhile (all its threads: exact
for one request at a time, and on SQLite it includes the database's work; PostgreSQL's runs in
its own processes). Milliseconds, one decimal. Benchmarks (``bench/experiment_list.py``) and
browsers' developer tools read them to tell server time from transfer and client time, and
work from waiting for a busy machine's CPU.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ServerTimingMiddleware"]


class ServerTimingMiddleware:
    """Adds ``Server-Timing`` to the answers of ``/api/`` requests (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/api/"):
            await self.app(scope, receive, send)
            return
        started, cpu_started = time.perf_counter(), time.process_time()

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = (time.perf_counter() - started) * 1000
                cpu = (time.process_time() - cpu_started) * 1000
                header = (b"server-timing", f"app;dur={took:.1f}, cpu;dur={cpu:.1f}".encode())
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        await self.app(scope, receive, timed_send)
