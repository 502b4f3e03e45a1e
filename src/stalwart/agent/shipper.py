"""The log shipper: every container's queued lines to ``POST /api/v1/task/logs``.

One thread posts each :class:`~stalwart.agent.logs.ContainerLog` in order, with that
container's allocation token, in batches of at most ``batch_lines``: at least every
``flush_seconds`` while lines arrive, at once on :meth:`LogShipper.kick` or when a queue holds a
full batch. Queues take turns, one batch each.

Master away (transport errors, 5xx): the batch stays queued and is retried with the shared
backoff of :mod:`stalwart._retry` (honouring a ``Retry-After``, at most ``max_backoff_seconds``
apart; the queues' bound applies meanwhile); this is logged once per outage. Batches may be
posted twice when an answer is lost (log lines are not deduplicated). Any other refusal
(4xx: a finished allocation, a bad line) drops that batch with a warning.
"""

from __future__ import annotations

import logging
import threading
import time

import httpx

from stalwart._retry import RetryPolicy, describe, retry_after, retryable_response
from stalwart.agent.context import task_headers
from stalwart.agent.logs import ContainerLog, Entry, LogContext, SecretMask

__all__ = ["LogShipper"]

log = logging.getLogger(__name__)

_POST_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


class _MasterAwayError(Exception):
    """The master is away; try the batch again later (not before ``retry_after`` seconds when
    it said so)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LogShipper:
    """Posts every :class:`ContainerLog` from one background thread (see the module docs).

    :meth:`open` and :meth:`release` may be called from any thread; :meth:`close` flushes
    what it can within its timeout and stops the thread.
    """

    def __init__(
        self,
        master_url: str,
        *,
        batch_lines: int = 1000,
        flush_seconds: float = 0.5,
        buffer_lines: int = 100_000,
        max_backoff_seconds: float = 5.0,
        mask: SecretMask | None = None,
    ) -> None:
        self.url = f"{master_url}/api/v1/task/logs"
        self.mask = mask or SecretMask()
        self.batch_lines = batch_lines
        self.flush_seconds = flush_seconds
        self.buffer_lines = buffer_lines
        self.max_backoff = max_backoff_seconds
        self._retry = RetryPolicy(
            max_backoff_s=max_backoff_seconds, max_retry_after_s=max_backoff_seconds
        )
        self._streams: list[ContainerLog] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._deadline = float("inf")
        self._thread = threading.Thread(target=self._run, name="log shipper", daemon=True)
        self._outage: float | None = None

    def open(self, context: LogContext) -> ContainerLog:
        """A new queue for one container's lines."""
        stream = ContainerLog(
            context,
            max_lines=self.buffer_lines,
            batch_lines=self.batch_lines,
            wake=self._wake,
            mask=self.mask,
        )
        with self._lock:
            self._streams.append(stream)
        return stream

    def release(self, stream: ContainerLog) -> None:
        """The container is gone: drop the queue once it is empty."""
        stream.released = True
        self._wake.set()

    def kick(self) -> None:
        """Ship what is queued now rather than at the next interval."""
        self._wake.set()

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Ship what can be shipped within ``timeout`` seconds, then stop the thread."""
        if not self._thread.is_alive():
            return
        self._deadline = time.monotonic() + timeout
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout + 1.0)

    def _run(self) -> None:
        failures = 0
        with httpx.Client(timeout=_POST_TIMEOUT) as client:
            while True:
                if self._stop.is_set() and (
                    time.monotonic() >= self._deadline or not self._any_pending()
                ):
                    return
                try:
                    more = self._ship_pass(client)
                    failures = 0
                except _MasterAwayError as away:
                    backoff = self._retry.wait(failures, away.retry_after)
                    failures += 1
                    pause = min(backoff, max(0.0, self._deadline - time.monotonic()))
                    if self._stop.is_set():
                        time.sleep(pause)
                    else:
                        self._stop.wait(pause)
                    continue
                except Exception:  # never let a bug stop log shipping for good
                    log.exception("log shipper failed; retrying")
                    time.sleep(1.0)
                    continue
                if not more and not self._stop.is_set():
                    self._wake.wait(self.flush_seconds)
                    self._wake.clear()

    def _any_pending(self) -> bool:
        with self._lock:
            return any(stream.pending() for stream in self._streams)

    def _ship_pass(self, client: httpx.Client) -> bool:
        """Post one batch of every queue; whether any queue still holds lines."""
        with self._lock:
            self._streams = [s for s in self._streams if not (s.released and not s.pending())]
            streams = list(self._streams)
        for stream in streams:
            batch = stream.peek(self.batch_lines)
            if batch:
                try:
                    self._post(client, stream, batch)
                finally:
                    stream.settle()
        return any(stream.pending() for stream in streams)

    def _post(
        self, client: httpx.Client, stream: ContainerLog, batch: list[tuple[int, Entry]]
    ) -> None:
        headers = task_headers(stream.context.token)
        try:
            resp = client.post(self.url, json={"logs": [e for _, e in batch]}, headers=headers)
        except httpx.TransportError as exc:
            self._away(f"{type(exc).__name__}: {exc}")
        else:
            if retryable_response(resp, "POST") or resp.status_code >= 500:
                self._away(describe(resp), retry_after(resp))
            if resp.status_code != 200:
                log.warning(
                    "the master refused %d log lines of container %s (HTTP %d: %s); dropped",
                    len(batch),
                    stream.context.container_id,
                    resp.status_code,
                    resp.text[:200],
                )
        if self._outage is not None:
            log.info("log shipping resumed after %.0fs", time.monotonic() - self._outage)
            self._outage = None
        dropped = stream.take_dropped()
        if dropped:
            log.warning(
                "dropped %d log lines of container %s while the master was unreachable",
                dropped,
                stream.context.container_id,
            )
        stream.done_through(batch[-1][0])

    def _away(self, why: str, after: float | None = None) -> None:
        if self._outage is None:
            self._outage = time.monotonic()
            log.warning("cannot ship logs to %s (%s); buffering and retrying", self.url, why)
        raise _MasterAwayError(why, after)
