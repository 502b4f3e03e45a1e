"""Metrics reports and the one background thread that ships them to the master.

Contract:

- :func:`prepare_report` checks a report and snapshots it as wire JSON in the caller's thread,
  so a bad value raises at the call that reported it and later changes to the caller's dicts do
  not leak into the report.
- :class:`MetricsShipper` sends reports **in the order they were published** from **one** thread
  through ``POST /api/v1/trials/metrics/batch``: each post carries whatever is queued (at most
  ``max_batch`` reports and about ``max_batch_bytes``); a post is retried (the session's policy)
  until it lands before the next one is sent. The queue is bounded: :meth:`publish` blocks while
  it is full (back-pressure while the master restarts).
- A refused post (4xx) is logged and its reports are dropped; the first such error is raised by
  the next :meth:`publish` or by :meth:`close` (Determined's behaviour). A 413 splits the batch.
- :meth:`close` flushes: everything published before it is sent (or fails) within the session's
  retry deadline, counted from the call. A process that exits without closing flushes at exit.
"""

from __future__ import annotations

import atexit
import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stalwart import errors
from stalwart.core._client import Session
from stalwart.core._json import dumps, jsonable

__all__ = ["MAX_GROUP_LENGTH", "MetricsReport", "MetricsShipper", "prepare_report"]

logger = logging.getLogger("stalwart.core")

MAX_GROUP_LENGTH = 64
"""Longest metric group name the master accepts."""


@dataclass(frozen=True)
class MetricsReport:
    """One report, already wire JSON (see :func:`prepare_report`)."""

    group: str
    steps_completed: int
    metrics: dict[str, Any]
    batch_metrics: list[dict[str, Any]] | None
    report_time: str


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
    return MetricsReport(
        group=group,
        steps_completed=steps_completed,
        metrics=jsonable(metrics, "metrics"),
        batch_metrics=batches,
        report_time=dt.datetime.now(dt.UTC).isoformat(),
    )


_STOP = object()


class MetricsShipper:
    """Ships a trial run's reports in order from one thread (see the module contract)."""

    def __init__(
        self,
        session: Session,
        trial_id: int,
        trial_run_id: int,
        *,
        max_queue: int = 1000,
        max_batch: int = 1000,
        max_batch_bytes: int = 1 << 20,
    ) -> None:
        self._session = session
        self._trial_id = trial_id
        self._trial_run_id = trial_run_id
        self._max_batch = max_batch
        self._max_batch_bytes = max_batch_bytes
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._thread = threading.Thread(
            target=self._run, name=f"stalwart-metrics-{trial_id}", daemon=True
        )
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._flush_deadline: float | None = None
        self._closed = False
        self.dropped = 0
        """Reports that were not delivered (refused by the master or unreachable)."""

    def _wire(self, report: MetricsReport) -> bytes:
        return dumps(
            {
                "group": report.group,
                "metrics": {
                    "trialId": self._trial_id,
                    "trialRunId": self._trial_run_id,
                    "stepsCompleted": report.steps_completed,
                    "reportTime": report.report_time,
                    "metrics": {
                        "avgMetrics": report.metrics,
                        "batchMetrics": report.batch_metrics,
                    },
                },
            }
        )

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
        """Queue a report (blocks while the queue is full); raises a pending error first."""
        self.raise_pending()
        self._start()
        self._queue.put(report)

    def close(self, *, raise_errors: bool = True) -> None:
        """Flush and stop the thread; then raise a pending error (unless ``raise_errors`` is
        False, when it is only logged). Idempotent."""
        with self._lock:
            already, self._closed = self._closed, True
            started = self._thread.ident is not None
        if not already and started:
            atexit.unregister(self._flush_at_exit)
            self._flush_deadline = time.monotonic() + self._session.retry.deadline_s
            self._queue.put(_STOP)
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

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[bytes] = []
            size = 0
            item = self._queue.get()
            while True:
                if item is _STOP:
                    stopping = True
                    break
                assert isinstance(item, MetricsReport)
                raw = self._wire(item)
                batch.append(raw)
                size += len(raw) + 1
                if len(batch) >= self._max_batch or size >= self._max_batch_bytes:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._ship(batch)

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
        self.dropped += count
        logger.error("dropped %d metrics report(s) of trial %d: %s", count, self._trial_id, exc)
        with self._lock:
            if self._error is None:
                self._error = exc
