"""The master's clock: every timeout the cluster loop and the resource managers count goes
through one :class:`Clock`, so tests drive time (:class:`ManualClock`) instead of sleeping.

Contract: :meth:`Clock.monotonic` never goes back (use it for durations); :meth:`Clock.now` is
the UTC wall time comparable with the timestamps the master stores (heartbeats, exits).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Where the master reads the time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for durations)."""
        ...

    def now(self) -> dt.datetime:
        """The current UTC time (aware), comparable with stored timestamps."""
        ...


class SystemClock:
    """The real clock (the default)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)


class ManualClock:
    """A clock that moves only when told: it starts at the real time and :meth:`advance` adds
    to both readings. Thread-safe. For tests of timeouts (lost agents, preemption, stuck jobs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._monotonic = time.monotonic()
        self._now = dt.datetime.now(dt.UTC)
        self._offset = 0.0

    def advance(self, seconds: float) -> None:
        """Move both readings forward by ``seconds`` (not negative)."""
        if seconds < 0:
            raise ValueError("a clock does not go back")
        with self._lock:
            self._offset += seconds

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic + self._offset

    def now(self) -> dt.datetime:
        with self._lock:
            return self._now + dt.timedelta(seconds=self._offset)
