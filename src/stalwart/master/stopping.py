"""A clean stop: what the master does between SIGTERM and its exit.

:class:`StopGate` is made by ``create_app`` and begun by the server's signal handler
(:mod:`stalwart.master.serve`) or, at the latest, by the app's lifespan as it ends. Contract:

- **New work is refused** from the moment the stop begins: every HTTP request that arrives is
  answered 503 ``Unavailable`` in the master's error shape with ``Retry-After`` (the clients of
  :mod:`stalwart._retry` wait that long, then find the next master).
- **Waits end at once**: the stop callbacks close the :class:`~stalwart.master.state.Notifier`
  and the log ring, so agent sync and preemption long-polls answer what they have and log
  follows end their streams, rather than holding the grace period.
- **Requests in flight** get :data:`GRACE_S` to finish. Then, one that has not begun its answer
  is answered 503 (its handler may still finish in a worker thread, its answer dropped: every
  client that retries 503 sends only requests that are safe to repeat, see
  :mod:`stalwart._retry`); a stream that has begun gets a last in-band error line
  (``Unavailable``) and its end, so a reader sees the stream was cut, not complete.
- The server's own graceful timeout (:data:`SERVER_GRACE_S`) is a backstop past the grace; the
  lifespan's shutdown (cluster loop, resource manager, engine) follows. The whole stop takes
  well under :data:`STOP_BUDGET_S`.

:class:`StopMiddleware` is the ASGI side (HTTP only; WebSockets are closed by the server).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stalwart.master.api.models.logs import stream_error_line

__all__ = [
    "GRACE_S",
    "RETRY_AFTER_S",
    "SERVER_GRACE_S",
    "STOP_BUDGET_S",
    "StopGate",
    "StopMiddleware",
]

log = logging.getLogger("stalwart.master")

GRACE_S = 2.0
"""How long requests in flight may run on once the stop begins."""
SERVER_GRACE_S = 3.0
"""uvicorn's ``timeout_graceful_shutdown``: a backstop past :data:`GRACE_S`."""
STOP_BUDGET_S = 5.0
"""The bound on the stop, signal to process exit (tested in tests/reliability)."""
RETRY_AFTER_S = 1
"""``Retry-After`` of the 503 answers during a stop."""

_MESSAGE = "the master is stopping; retry shortly"


def _body(message: str) -> bytes:
    error = {"code": 14, "reason": "Unavailable", "error": message}
    return json.dumps({"message": message, "error": error}).encode()


class StopGate:
    """The stop's state, shared by the server, the middleware and the lifespan."""

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self._requested = False
        self._begun = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expired: asyncio.Future[None] | None = None
        self._callbacks: list[Callable[[], None]] = []

    @property
    def stopping(self) -> bool:
        """Whether the stop was asked for."""
        return self._requested

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to the server's event loop (the lifespan does, before the first request)."""
        self._loop = loop
        self._expired = loop.create_future()
        if self._requested:
            loop.call_soon(self._begin)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` in the event loop when the stop begins (e.g. close the notifier)."""
        self._callbacks.append(callback)

    def begin(self) -> None:
        """Begin the stop (idempotent). Safe in a signal handler and from any thread: it only
        sets a flag and schedules the rest on the event loop."""
        self._requested = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self._begin)

    def _begin(self) -> None:
        if self._begun:
            return
        self._begun = True
        log.info("stopping: new requests get 503, requests in flight %.1fs", self.grace_s)
        for callback in self._callbacks:
            try:
                callback()
            except Exception:
                log.exception("a stop callback failed")
        assert self._loop is not None
        self._loop.call_later(self.grace_s, self._expire)

    def _expire(self) -> None:
        if self._expired is not None and not self._expired.done():
            self._expired.set_result(None)

    @property
    def expired(self) -> asyncio.Future[None] | None:
        """Done once the grace of requests in flight has passed (None before :meth:`bind`)."""
        return self._expired


async def _send_unavailable(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", str(RETRY_AFTER_S).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _body(_MESSAGE)})


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark an abandoned handler's outcome as seen (no "exception never retrieved")."""
    if not task.cancelled():
        task.exception()


class StopMiddleware:
    """Applies :class:`StopGate` to HTTP requests (see the module contract)."""

    def __init__(self, app: ASGIApp, *, gate: StopGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gate = self.gate
        expired = gate.expired
        if scope["type"] != "http" or expired is None:
            await self.app(scope, receive, send)
            return
        if gate.stopping:
            await _send_unavailable(send)
            return
        started = finished = abandoned = False

        async def guarded_send(message: Message) -> None:
            nonlocal started, finished
            if abandoned:
                return  # answered 503 (or cut) already; the handler's late answer is dropped
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finished = True
            await send(message)

        # The handler runs as a task of its own, so that this request can be answered when
        # the grace passes even while the handler waits for a worker thread.
        task: asyncio.Task[Any] = asyncio.ensure_future(self.app(scope, receive, guarded_send))
        task.add_done_callback(_retrieve)
        try:
            await asyncio.wait({task, expired}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.done():
            task.result()  # the handler's exception, if any, goes to the server as before
            return
        abandoned = True
        task.cancel()
        if not started:
            log.warning(
                "%s %s did not finish within the stop's grace; answered 503",
                scope.get("method"),
                scope.get("path"),
            )
            await _send_unavailable(send)
        elif not finished:  # a stream: say it was cut, then end it
            line = stream_error_line(503, 14, _MESSAGE)
            await send({"type": "http.response.body", "body": line, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
