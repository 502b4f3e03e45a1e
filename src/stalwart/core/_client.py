"""A small session to the master for code running inside a task.

Contract:

- Every request carries the allocation token as ``Grpc-Metadata-x-allocation-token: Bearer
  <token>`` (wire doc 1.4) and a JSON body encoded by :mod:`stalwart.core._json`.
- Connection, read and protocol errors and HTTP 502/503/504 (honouring ``Retry-After``) are
  retried with capped exponential backoff until the request's deadline, by the shared
  :mod:`stalwart._retry` (:class:`RetryPolicy`, default five minutes: the master may be
  stopping or restarting). Every method is retried, so a request the master did apply may be sent
  again: the callers' requests are idempotent (checkpoint reports, progress, acks; the master
  stores a metrics report it already has only once, so a batch whose answer was lost is stored
  once), and a retry carries :data:`RETRY_HEADER` (the attempt number, for the master's logs).
- Any other status >= 400 raises at once: the :mod:`stalwart.errors` class of the status
  (400 :class:`InvalidArgumentError` or :class:`FailedPreconditionError`, 401, 403, 404, 409,
  413) or :class:`MasterAPIError`, with the master's message. A deadline that passes raises
  :class:`MasterUnreachableError`.
- Its requests log nothing into the task's output: httpx's and httpcore's records for them are
  dropped (:mod:`stalwart.core._httplog`) at any level the script configures; the script's own
  httpx requests keep theirs.
- Safe to share between threads. :meth:`Session.close` may be called from any thread: it wakes
  retry waits and shuts down the sockets of requests in flight, which then raise
  :class:`SessionClosedError` (this is how a 60-second long-poll is stopped at once).
"""

# ruff: noqa: E402
from __future__ import annotations

import contextlib
import functools
import logging
import socket
import ssl
import sys
import threading
import time
import weakref
from typing import Any

# httpx imports its command-line tool (with rich, click and pygments, when they are installed)
# as it is imported: half its import time, paid by every trial's start, for a tool a trial never
# runs. Hide that one module while httpx imports (httpx then offers a stub `main`), then let any
# later explicit import of it through. (So the imports below follow code: E402 is off here.)
_HIDDEN = "httpx._main"
if "httpx" not in sys.modules and _HIDDEN not in sys.modules:
    sys.modules[_HIDDEN] = None  # type: ignore[assignment]
    try:
        import httpx
    finally:
        del sys.modules[_HIDDEN]
import httpx  # (already imported above unless something imported it first)

from stalwart import errors
from stalwart._retry import (
    RETRY_HEADER,
    RETRY_STATUSES,
    RetriesExhaustedError,
    RetryPolicy,
    send_with_retries,
)
from stalwart.core import _httplog
from stalwart.core._json import dumps, jsonable

__all__ = [
    "RETRY_HEADER",
    "RETRY_STATUSES",
    "MasterAPIError",
    "MasterUnreachableError",
    "RetryPolicy",
    "Session",
    "SessionClosedError",
    "error_from_response",
]

logger = logging.getLogger("stalwart.core")


class MasterAPIError(errors.StalwartError):
    """The master refused a request with a status that has no class of its own."""

    code = "master_error"

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable (a worker process or pool re-raises it elsewhere) despite the keyword-only
        # status, which the default (``cls(*args)``) would lose.
        return (_master_api_error, (str(self), self.status))


def _master_api_error(message: str, status: int) -> MasterAPIError:
    return MasterAPIError(message, status=status)


class MasterUnreachableError(errors.StalwartError):
    """The master did not answer before the request's deadline."""

    code = "master_unreachable"


class SessionClosedError(errors.StalwartError):
    """The session was closed while a request waited or was in flight."""

    code = "session_closed"


def _message(resp: httpx.Response) -> str:
    """The master's error message (top-level ``message``, then ``error.message``, then
    ``error.error``, as the official client looks), else the start of the body."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        if isinstance(body.get("message"), str) and body["message"]:
            return str(body["message"])
        inner = body.get("error")
        if isinstance(inner, dict):
            for key in ("message", "error"):
                if isinstance(inner.get(key), str) and inner[key]:
                    return str(inner[key])
    text = resp.text.strip()
    return text[:500] if text else resp.reason_phrase


def _reason(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return ""
    inner = body.get("error") if isinstance(body, dict) else None
    return str(inner.get("reason", "")) if isinstance(inner, dict) else ""


def error_from_response(resp: httpx.Response) -> errors.StalwartError:
    """The exception for an error response (see the module contract)."""
    status = resp.status_code
    what = f"{resp.request.method} {resp.request.url.path}"
    message = f"the master refused {what} (HTTP {status}): {_message(resp)}"
    if status == 400:
        if _reason(resp) == "FailedPrecondition":
            return errors.FailedPreconditionError(message)
        return errors.InvalidArgumentError(message)
    by_status: dict[int, type[errors.StalwartError]] = {
        401: errors.UnauthenticatedError,
        403: errors.ForbiddenError,
        404: errors.NotFoundError,
        409: errors.AlreadyExistsError,
        413: errors.PayloadTooLargeError,
    }
    cls = by_status.get(status)
    if cls is not None:
        return cls(message)
    return MasterAPIError(message, status=status)


class Session:
    """Requests to one master with one allocation token (see the module contract)."""

    def __init__(
        self,
        master_url: str,
        token: str | None,
        *,
        retry: RetryPolicy | None = None,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.master_url = master_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.timeout_s = timeout_s
        self._token = token
        self._transport = transport
        headers = {"Accept": "application/json"}
        if token:
            headers["Grpc-Metadata-x-allocation-token"] = f"Bearer {token}"
        _httplog.install()  # the harness's requests stay out of the trial's log
        self._headers = headers
        self._client: httpx.Client | None = None  # made by the first request (_http)
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()

    def _http(self, closed: str) -> httpx.Client:
        """The session's client, made at its first request: a session that sends nothing
        (a trial's preemption watcher until ``should_preempt()``) costs no client. Raises
        :class:`SessionClosedError` once the session is closed."""
        with self._lock:
            if self._closed.is_set():
                raise SessionClosedError(closed)
            if self._client is None:
                https = self.master_url.startswith("https://")
                self._client = httpx.Client(
                    base_url=self.master_url,
                    headers=self._headers,
                    timeout=self.timeout_s,
                    transport=self._transport,
                    follow_redirects=False,
                    # A plain-HTTP master needs no certificates: loading the CA bundle costs
                    # every session 30 ms of CPU, and even an empty TLS context a few ms.
                    # HTTPS verifies as before.
                    verify=True if https else plain_http_context(),
                )
            return self._client

    def clone(self) -> Session:
        """A new session with the same master, token and policy (its own connections), e.g.
        for a thread whose requests :meth:`close` must be able to cut short on their own."""
        return Session(
            self.master_url,
            self._token,
            retry=self.retry,
            timeout_s=self.timeout_s,
            transport=self._transport,
        )

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed.is_set()

    def wait_closed(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, waking early when the session is closed; whether it
        is closed."""
        return self._closed.wait(timeout)

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with self._lock:
                    self._sockets.add(sock)
                    # A connection made while close() ran: close() may have missed it.
                    late = self._closed.is_set()
                if late:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content: bytes | None = None,
        params: dict[str, str] | None = None,
        timeout_s: float | None = None,
        deadline: float | None = None,
    ) -> httpx.Response:
        """Send one request, retrying as the module contract says; the 2xx/3xx response.

        ``body`` (any :func:`jsonable` value) is encoded once; ``content`` is JSON already
        encoded; with neither, no body is sent. ``deadline`` is a ``time.monotonic()`` instant
        that overrides the policy's deadline.
        """
        if body is not None:
            content = dumps(jsonable(body, "request body"))
        headers = {"Content-Type": "application/json"} if content is not None else {}
        give_up = time.monotonic() + self.retry.deadline_s if deadline is None else deadline
        closed = f"{method} {path}: the session is closed"

        def send(attempt: int) -> httpx.Response:
            if self._closed.is_set():
                raise SessionClosedError(closed)
            if attempt:  # the master may have done an earlier attempt whose answer was lost
                headers[RETRY_HEADER] = str(attempt)
            client = self._http(closed)
            try:
                with _httplog.harness_requests():
                    return client.request(
                        method,
                        path,
                        content=content,
                        headers=headers,
                        params=params,
                        timeout=self.timeout_s if timeout_s is None else timeout_s,
                        extensions={"trace": self._trace},
                    )
            except (httpx.TransportError, RuntimeError) as exc:
                # RuntimeError: httpx's "Cannot send a request, as the client has been closed"
                # when close() raced with this request.
                if self._closed.is_set():
                    raise SessionClosedError(closed) from exc
                raise

        def wait(seconds: float) -> None:
            if self._closed.wait(seconds):
                raise SessionClosedError(closed)

        def first(attempt: int, problem: str) -> None:
            if attempt == 0:
                logger.warning("master unreachable for %s %s (%s); retrying", method, path, problem)

        try:
            resp = send_with_retries(
                send, method=method, policy=self.retry, deadline=give_up, sleep=wait, on_retry=first
            )
        except RetriesExhaustedError as exc:
            raise MasterUnreachableError(
                f"the master at {self.master_url} did not answer {method} {path} in time "
                f"({exc.attempts} attempts; last: {exc.problem})",
                hint="check that the master is running and reachable from the task",
            ) from exc
        if resp.status_code >= 400:
            raise error_from_response(resp)
        return resp

    def get(self, path: str, *, params: dict[str, str] | None = None, **kw: Any) -> Any:
        """GET; the decoded JSON body (``{}`` when empty)."""
        return _json_of(self.request("GET", path, params=params, **kw))

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        """POST ``body`` (None: an empty body); the decoded JSON body (``{}`` when empty)."""
        return _json_of(self.request("POST", path, body=body, **kw))

    def patch(self, path: str, body: Any = None, **kw: Any) -> Any:
        """PATCH ``body``; the decoded JSON body (``{}`` when empty)."""
        return _json_of(self.request("PATCH", path, body=body, **kw))

    def close(self) -> None:
        """Stop: wake retry waits, cut requests in flight, close the connections (idempotent,
        any thread)."""
        self._closed.set()
        with self._lock:
            sockets = list(self._sockets)
            self._sockets.clear()
            client, self._client = self._client, None
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)
        if client is not None:
            with _httplog.harness_requests():
                client.close()


@functools.cache
def plain_http_context() -> ssl.SSLContext:
    """The TLS context of clients to a plain-HTTP master: one per process, never used for a
    handshake (httpx builds one for every client otherwise). The agent's warm Python makes it
    before it forks tasks, so they share it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no certificates loaded
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _json_of(resp: httpx.Response) -> Any:
    if not resp.content:
        return {}
    return resp.json()
