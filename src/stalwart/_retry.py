"""The one retry policy of every Stalwart client of the master.

Used by the Core API session (:mod:`stalwart.core._client`), the agent (sync loop, log
shipper, model-definition download), the batch-job launcher (:mod:`stalwart.hpc.task`) and the
SDK/CLI (:mod:`stalwart.client.session`). It needs httpx only, so the harness imports it
without the master's dependencies.

Contract:

- **Retried**: HTTP 502, 503 and 504 (a proxy, or a master that is stopping or restarting:
  the master's stop answers 503 with ``Retry-After``), and transport errors: refused or reset
  connections, connect/read/write timeouts, a connection that broke while the request was sent
  or the answer read (:data:`BROKEN_ERRORS`).
- **Never retried**: any 4xx, any other status, any other exception (they are the caller's).
- **Methods**: with ``retry_unsafe=False`` (the SDK), a request that is not idempotent
  (POST, PATCH) is retried only when it certainly never reached the master: its connection was
  refused or never opened (:data:`UNSENT_ERRORS`). Callers whose every request is safe to repeat
  (the harness: checkpoint reports idempotent on the UUID, metric reports stored once by the
  master however often they are sent; the agent: its sync is stateless) pass ``retry_unsafe=True``.
- **Waits**: the n-th wait (from 0) is ``min(max_backoff_s, initial_backoff_s * 2**n)`` plus up
  to ``jitter`` (10 %); a ``Retry-After`` (seconds or an HTTP date) makes it at least that long,
  capped at ``max_retry_after_s``. A request gives up when the next wait would end past its
  deadline (``deadline_s`` after its start): :class:`RetriesExhaustedError`, with the last
  problem and, when the last attempt got an answer, that response.
- Every retry of a request should carry :data:`RETRY_HEADER` (the attempt, from 1): the
  callback :func:`send_with_retries` calls gets the attempt number to add it.

Why not tenacity (not a dependency of the harness) or httpx's transport retries (connect
errors only): the waits must be interruptible (a closed Core API session wakes them at once),
honour ``Retry-After`` under a deadline, and tell an unsent request from a sent one. That is
the ~100 lines below.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

__all__ = [
    "BROKEN_ERRORS",
    "IDEMPOTENT_METHODS",
    "RETRY_HEADER",
    "RETRY_STATUSES",
    "UNSENT_ERRORS",
    "RetriesExhaustedError",
    "RetryPolicy",
    "describe",
    "retry_after",
    "retryable_error",
    "retryable_response",
    "send_with_retries",
]

log = logging.getLogger("stalwart.retry")

RETRY_STATUSES = frozenset({502, 503, 504})
"""Statuses a proxy or a stopping/restarting master answers: retried like a refused connection."""

RETRY_HEADER = "X-Stalwart-Retry"
"""Sent with every retry of a request (its value: the attempt, from 1). The master stores a
retried metrics batch only where it is not stored already (an earlier attempt may have been
stored and its answer lost)."""

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})

UNSENT_ERRORS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)
"""The request never left this process: safe to retry whatever its method."""

BROKEN_ERRORS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)
"""The master is away or the connection broke (refused, reset, closed mid-answer, timed out)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying an unreachable master (see the module contract)."""

    initial_backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    deadline_s: float = 300.0
    max_retry_after_s: float = 30.0
    jitter: float = 0.1

    def backoff(self, attempt: int) -> float:
        """The wait before retry number ``attempt + 1`` (without a ``Retry-After``)."""
        base = min(self.max_backoff_s, self.initial_backoff_s * (2.0 ** min(attempt, 32)))
        return base * (1.0 + random.uniform(0.0, self.jitter))

    def wait(self, attempt: int, after: float | None = None) -> float:
        """The wait before retry number ``attempt + 1``; at least ``after`` (a
        ``Retry-After``, capped at ``max_retry_after_s``) when one was given."""
        wait = self.backoff(attempt)
        if after is not None and after > 0:
            asked = min(after, self.max_retry_after_s)
            wait = max(wait, asked * (1.0 + random.uniform(0.0, self.jitter)))
        return wait


class RetriesExhaustedError(Exception):
    """The deadline passed before the master gave an answer worth keeping."""

    def __init__(self, problem: str, attempts: int, response: httpx.Response | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.attempts = attempts
        self.response = response
        """The last retryable answer (read and closed), or None when the last try failed."""


def retry_after(response: httpx.Response) -> float | None:
    """The answer's ``Retry-After`` in seconds (delta-seconds or an HTTP date), else None."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def retryable_error(exc: BaseException, method: str, *, retry_unsafe: bool = True) -> bool:
    """Whether a request that raised ``exc`` may be tried again (see the module contract)."""
    if isinstance(exc, UNSENT_ERRORS):
        return True
    if not isinstance(exc, BROKEN_ERRORS):
        return False
    return retry_unsafe or method.upper() in IDEMPOTENT_METHODS


def retryable_response(response: httpx.Response, method: str, *, retry_unsafe: bool = True) -> bool:
    """Whether an answer asks for the same request again later (see the module contract)."""
    if response.status_code not in RETRY_STATUSES:
        return False
    return retry_unsafe or method.upper() in IDEMPOTENT_METHODS


def describe(response: httpx.Response) -> str:
    """``HTTP 503: <the master's message>`` (the body's ``message``, else its start)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = response.text.strip()[:300] or response.reason_phrase
    return f"HTTP {response.status_code}: {message}"


def send_with_retries(
    send: Callable[[int], httpx.Response],
    *,
    method: str,
    policy: RetryPolicy,
    deadline: float | None = None,
    retry_unsafe: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, str], None] | None = None,
) -> httpx.Response:
    """Call ``send(attempt)`` (attempt 0, 1, ...) until it gives an answer not to retry; that
    answer (any status but a retried one: the caller maps errors).

    ``deadline``: a ``time.monotonic()`` instant (default: ``policy.deadline_s`` from now).
    ``sleep(seconds)`` waits between attempts and may raise to abort (a closed session).
    ``on_retry(attempt, problem)`` is called before each wait (e.g. to log the first one).
    Exceptions ``send`` raises that are not retryable propagate; a deadline that passes raises
    :class:`RetriesExhaustedError` (chained to the last exception, if any).
    """
    give_up = time.monotonic() + policy.deadline_s if deadline is None else deadline
    attempt = 0
    while True:
        last: httpx.Response | None = None
        error: BaseException | None = None
        try:
            response = send(attempt)
        except Exception as exc:
            if not retryable_error(exc, method, retry_unsafe=retry_unsafe):
                raise
            error, problem, wait = exc, f"{type(exc).__name__}: {exc}", policy.wait(attempt)
        else:
            if not retryable_response(response, method, retry_unsafe=retry_unsafe):
                return response
            response.read()
            response.close()
            last, problem = response, describe(response)
            wait = policy.wait(attempt, retry_after(response))
        if time.monotonic() + wait > give_up:
            raise RetriesExhaustedError(problem, attempt + 1, last) from error
        if on_retry is not None:
            on_retry(attempt, problem)
        attempt += 1
        sleep(wait)
