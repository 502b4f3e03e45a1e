"""Metrics reports and the one background thread that ships them to the master.

Contract:

- :func:`prepare_report` checks a report and snapshots it as wire JSON in the caller's thread,
  so a bad value raises at the call that reported it and later changes to the caller's dicts do
  not leak into the report.
- :class:`MetricsShipper` sends reports **in the order they were published** from **one** thread
  through ``POST /api/v1/trials/metrics/batch``: each post carries whatever is queued (at most
  ``max_batch`` reports and about ``max_batch_bytes``); a post is retried (the session's policy)
  until it lands before the next one is sent. :meth:`publish` encodes the report in the
  caller's thread (a few microseconds), so the metrics thread only joins and posts, and the
  master never waits for encoding. The queue is bounded by the size of the encoded reports
  (``max_queue_bytes``, 32 MiB: about 100,000 reports of ten metrics): :meth:`publish` blocks
  while it is full (back-pressure while the master restarts or cannot keep up).
- A refused post (4xx) is logged and its reports are dropped; the first such error is raised by
  the next :meth:`publish` or by :meth:`close` (Determined's behaviour). A 413 splits the batch.
  A thread inside :func:`background_reporter` (the profiler) never gets that error: it stays
  pending for the training code.
- :meth:`flush` waits until everything published before it has been posted (or has failed);
  the checkpoint context calls it before it reports a checkpoint, so a checkpoint the master
  accepted never stands ahead of metrics reported before it (a resumed run starts after that
  checkpoint and would not report them again).
- :meth:`close` flushes: everything published before it is sent (or fails) within the session's
  retry deadline, counted from the call. A process that exits without closing flushes at exit.
- **Under Stalwart's agent** (a ``spool`` directory, ``STALWART_REPORTS_SPOOL``) a report
  waits up to ``LINGER_S`` for others before it is posted, and :meth:`close` does not wait for
  the master: the reports not yet answered (queued, or in a post under way) are written to one
  file in the spool (at most ``SPOOL_MAX_BYTES``; over that, or when the file cannot be
  written, close flushes as above). The agent reads the spool when the process exits and sends
  the reports with the exit; the master stores them before it records the exit. A report
  that both a post and the exit deliver is stored once (the master keys reports by their
  ``reportTime``). So a trial that reports and exits does not wait a round trip to the master,
  and its last report costs no request of its own.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import datetime as dt
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stalwart import errors
from stalwart.core._client import Session
from stalwart.core._json import jsonable

__all__ = [
    "LINGER_S",
    "MAX_GROUP_LENGTH",
    "SPOOL_MAX_BYTES",
    "MetricsReport",
    "MetricsShipper",
    "background_reporter",
    "prepare_report",
]

logger = logging.getLogger("stalwart.core")

MAX_GROUP_LENGTH = 64
"""Longest metric group name the master accepts."""
LINGER_S = 0.01
"""With a spool: how long a report that finds the metrics thread idle waits for others (a
flush, a close or a full batch ends the wait)."""
SPOOL_MAX_BYTES = 1 << 20
"""With a spool: the most :meth:`MetricsShipper.close` writes there (more is posted)."""

_INF = float("inf")
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode


@dataclass(frozen=True)
class MetricsReport:
    """One report, already wire JSON (see :func:`prepare_report`)."""

    group: str
    steps_completed: int
    metrics: dict[str, Any]
    batch_metrics: list[dict[str, Any]] | None
    reported_at: float
    """When it was reported (seconds since the epoch)."""

    @property
    def report_time(self) -> str:
        """:attr:`reported_at` as the wire's ISO 8601 UTC time."""
        return dt.datetime.fromtimestamp(self.reported_at, dt.UTC).isoformat()


def _snapshot(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`jsonable` of a metrics dict, with a fast path for the common case (a dict of
    string keys to finite floats and ints), where a shallow copy is the same thing."""
    if type(metrics) is dict:
        for key, value in metrics.items():
            kind = type(value)
            if type(key) is not str or not (
                kind is int or (kind is float and -_INF < value < _INF)
            ):
                break
        else:
            return dict(metrics)
    snapshot: dict[str, Any] = jsonable(metrics, "metrics")
    return snapshot


def prepare_report(
    group: str,
    steps_completed: int,
    metrics: Mapping[str, Any],
    batch_metrics: Sequence[Mapping[str, Any]] | None = None,
) -> MetricsReport:
    """A checked, JSON-safe snapshot of a report (:class:`TypeError`/:class:`ValueError` for
    a bad group, step count or value)."""
    if not isinstance(group, str) or not 0 < len(group) <= MAX_GROUP_LENGTH:
        raise ValueError(f"metric group must be 1 to {MAX_GROUP_LENGTH} characters: {group!r}")
    if isinstance(steps_completed, bool) or not isinstance(steps_completed, int):
        raise TypeError(f"steps_completed must be an int, got {type(steps_completed).__name__}")
    if steps_completed < 0:
        raise ValueError(f"steps_completed must be >= 0, got {steps_completed}")
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a dict, got {type(metrics).__name__}")
    batches = None
    if batch_metrics is not None:
        batches = [jsonable(b, f"batch_metrics[{i}]") for i, b in enumerate(batch_metrics)]
        if not all(isinstance(b, dict) for b in batches):
            raise TypeError("batch_metrics must be a list of dicts")
    return MetricsReport(group, steps_completed, _snapshot(metrics), batches, time.time())


_STOP = object()


class _Flushed(threading.Event):
    """A queue marker: set by the metrics thread once every item before it was posted."""


def _marker(item: object) -> bool:
    return item is _STOP or isinstance(item, _Flushed)


class _ByteQueue:
    """A FIFO of encoded reports bounded by their total size (one item larger than the bound
    is still accepted when the queue is empty). It also knows the batch its taker is posting
    (:attr:`in_flight`, from :meth:`take` until :meth:`posted`), so that :meth:`hand_over`
    can give away every report not yet answered at once."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._items: collections.deque[tuple[object, int]] = collections.deque()
        self._bytes = 0
        self._cond = threading.Condition(threading.Lock())
        self.in_flight: list[bytes] = []

    def put(self, item: object, size: int) -> None:
        """Append ``item`` (of ``size`` bytes), waiting while that would pass the bound."""
        with self._cond:
            while self._items and self._bytes + size > self._max_bytes:
                self._cond.wait()
            self._items.append((item, size))
            self._bytes += size
            if len(self._items) == 1 or _marker(item):
                self._cond.notify_all()

    def take(self, max_items: int, max_bytes: int, linger_s: float = 0.0) -> list[object]:
        """The oldest items (at least one, waiting for it): up to ``max_items`` and until their
        size reaches ``max_bytes``; a stop or flush marker ends the list. With ``linger_s``, a
        report that finds nothing else queued waits that long for company (a marker or
        ``max_items`` ends the wait); a queue that filled meanwhile is taken at once.
        The reports taken are :attr:`in_flight` until :meth:`posted`."""
        with self._cond:
            while not self._items:
                self._cond.wait()
            if linger_s > 0 and len(self._items) == 1 and not _marker(self._items[0][0]):
                until = time.monotonic() + linger_s
                while (
                    len(self._items) < max_items
                    and not _marker(self._items[-1][0])
                    and (left := until - time.monotonic()) > 0
                ):
                    self._cond.wait(left)
            out: list[object] = []
            size = 0
            while self._items and len(out) < max_items and size < max_bytes:
                item, item_size = self._items.popleft()
                out.append(item)
                size += item_size
                if _marker(item):
                    break
            self._bytes -= size
            self.in_flight = [item for item in out if isinstance(item, bytes)]
            self._cond.notify_all()
            return out

    def posted(self) -> None:
        """The batch :meth:`take` gave out was answered (stored, or refused for good)."""
        with self._cond:
            self.in_flight = []

    def hand_over(self, max_bytes: int) -> list[bytes] | None:
        """Every report not yet answered (the batch in flight, then the queued ones), taken
        out of the queue, which is left holding a stop marker; None, with nothing changed,
        when they come to more than ``max_bytes``. Flush markers taken out are set: what
        they wait for has been handed over."""
        with self._cond:
            reports = [*self.in_flight]
            reports += [item for item, _ in self._items if isinstance(item, bytes)]
            if sum(len(r) + 1 for r in reports) > max_bytes:
                return None
            for item, _ in self._items:
                if isinstance(item, _Flushed):
                    item.set()
            self._items.clear()
            self._items.append((_STOP, 0))
            self._bytes = 0
            self.in_flight = []
            self._cond.notify_all()
            return reports


_thread_state = threading.local()


@contextlib.contextmanager
def background_reporter() -> Iterator[None]:
    """Within the block, :meth:`MetricsShipper.publish` from this thread does not raise the
    errors the metrics thread met: they stay pending for the training code."""
    _thread_state.background = True
    try:
        yield
    finally:
        _thread_state.background = False


class MetricsShipper:
    """Ships a trial run's reports in order from one thread (see the module contract)."""

    def __init__(
        self,
        session: Session,
        trial_id: int,
        trial_run_id: int,
        *,
        max_queue_bytes: int = 32 << 20,
        max_batch: int = 1000,
        max_batch_bytes: int = 1 << 20,
        spool: Path | None = None,
    ) -> None:
        self._session = session
        self._spool = spool
        self._linger_s = LINGER_S if spool is not None else 0.0
        self._trial_id = trial_id
        self._trial_run_id = trial_run_id
        self._max_batch = max_batch
        self._max_batch_bytes = max_batch_bytes
        self._queue = _ByteQueue(max_queue_bytes)
        self._thread = threading.Thread(
            target=self._run, name=f"stalwart-metrics-{trial_id}", daemon=True
        )
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._flush_deadline: float | None = None
        self._closed = False
        self._handed_over = False
        self._heads: dict[str, bytes] = {}
        self.dropped = 0
        """Reports that were not delivered (refused by the master or unreachable)."""

    def _wire(self, report: MetricsReport) -> bytes:
        """One report of the batch body (``{"group": ..., "metrics": {...}}``), assembled
        around the JSON of its metrics (the envelope's fixed part is made once per group)."""
        head = self._heads.get(report.group)
        if head is None:
            head = (
                f'{{"group":{_ENCODE(report.group)},"metrics":{{"trialId":{self._trial_id},'
                f'"trialRunId":{self._trial_run_id},"stepsCompleted":'
            ).encode()
            self._heads[report.group] = head
        batch = "null" if report.batch_metrics is None else _ENCODE(report.batch_metrics)
        tail = (
            f'{report.steps_completed},"reportTime":"{report.report_time}",'
            f'"metrics":{{"avgMetrics":{_ENCODE(report.metrics)},"batchMetrics":{batch}}}}}}}'
        )
        return head + tail.encode()

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("metrics cannot be reported after the context was closed")
            if not self._thread.is_alive() and self._thread.ident is None:
                self._thread.start()
                atexit.register(self._flush_at_exit)

    def raise_pending(self) -> None:
        """Raise (once) the first error the thread met since the last call."""
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            raise error

    def publish(self, report: MetricsReport) -> None:
        """Queue a report (blocks while the queue is full); raises a pending error first
        (except in a :func:`background_reporter`)."""
        if not getattr(_thread_state, "background", False):
            self.raise_pending()
        self._start()
        raw = self._wire(report)
        self._queue.put(raw, len(raw) + 1)

    def flush(self) -> None:
        """Wait until every report published before this call was posted or failed (a
        failure stays pending for the next report). Returns at once when nothing was ever
        published or the shipper is closed."""
        with self._lock:
            if self._closed or self._thread.ident is None:
                return
        marker = _Flushed()
        self._queue.put(marker, 0)
        marker.wait()

    def close(self, *, raise_errors: bool = True) -> None:
        """Flush and stop the thread, or with a spool hand what is not yet answered to the
        agent (see the module contract); then raise a pending error (unless ``raise_errors`` is
        False, when it is only logged). Idempotent."""
        with self._lock:
            already, self._closed = self._closed, True
            started = self._thread.ident is not None
        if not already and started:
            atexit.unregister(self._flush_at_exit)
            self._flush_deadline = time.monotonic() + self._session.retry.deadline_s
            if not self._spooled():
                self._queue.put(_STOP, 0)
                self._thread.join()
        if raise_errors:
            self.raise_pending()
        else:
            with self._lock:
                error, self._error = self._error, None
            if error is not None:
                logger.error("metrics were not all delivered: %s", error)

    def _flush_at_exit(self) -> None:
        self.close(raise_errors=False)

    def _spooled(self) -> bool:
        """Hand the unanswered reports to the agent through the spool; whether that was done
        (the thread then stops by itself; a post under way may still land, which the master
        tells apart). False, with the queue as it was, without a spool or when they are over
        ``SPOOL_MAX_BYTES``; when the file cannot be written they are posted from here."""
        if self._spool is None:
            return False
        reports = self._queue.hand_over(SPOOL_MAX_BYTES)
        if reports is None:
            return False
        if not reports:
            return True
        content = b'{"reports":[' + b",".join(reports) + b"]}"
        tmp: str | None = None
        try:  # written under a hidden name, renamed: the agent reads whole files only
            fd, tmp = tempfile.mkstemp(dir=self._spool, prefix=".reports-", suffix=".json")
            with os.fdopen(fd, "wb") as out:
                out.write(content)
            os.replace(tmp, os.path.join(self._spool, os.path.basename(tmp)[1:]))
            self._handed_over = True
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            logger.warning("could not hand the last reports to the agent (%s); posting them", exc)
            self._ship(reports)
        return True

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = self._queue.take(self._max_batch, self._max_batch_bytes, self._linger_s)
            marker = batch[-1] if batch else None
            stopping = marker is _STOP
            reports = [raw for raw in batch if isinstance(raw, bytes)]
            if reports:
                self._ship(reports)
                self._queue.posted()
            if isinstance(marker, _Flushed):
                marker.set()

    def _ship(self, batch: list[bytes]) -> None:
        content = b'{"reports":[' + b",".join(batch) + b"]}"
        try:
            self._session.request(
                "POST",
                "/api/v1/trials/metrics/batch",
                content=content,
                deadline=self._flush_deadline,
            )
        except errors.PayloadTooLargeError as exc:
            if len(batch) == 1:
                self._fail(exc, 1)
                return
            half = len(batch) // 2
            self._ship(batch[:half])
            self._ship(batch[half:])
        except Exception as exc:  # any failure: record it, keep the thread alive
            self._fail(exc, len(batch))

    def _fail(self, exc: Exception, count: int) -> None:
        if self._handed_over:  # a post under way at the hand-over: the agent has its reports
            logger.debug("a post of %d handed-over report(s) ended: %s", count, exc)
            return
        self.dropped += count
        logger.error("dropped %d metrics report(s) of trial %d: %s", count, self._trial_id, exc)
        with self._lock:
            if self._error is None:
                self._error = exc
