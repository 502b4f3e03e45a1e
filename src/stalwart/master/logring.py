"""The master's own recent log records, kept in memory for ``GET /api/v1/master/logs``.

:class:`LogRing` is a :class:`logging.Handler` that the app's lifespan attaches to the root
logger while the master runs (:meth:`LogRing.attached`), so it sees every record the master
process logs, whatever the database. It keeps the last ``capacity`` records (10,000 by default),
each with an id that grows by one per record from 1, and never restarts while the ring lives.

Readers take snapshots (:meth:`LogRing.read`, :meth:`LogRing.after`); followers await
:meth:`LogRing.wait_after`, which an ``emit`` from any thread wakes through the event loop the
waiter runs on (no polling). Records below the loggers' levels never reach the ring: the
``stalwart master`` command sets the ``stalwart`` loggers to INFO.

A master of several worker processes keeps every worker's records in each worker's ring: with
:attr:`LogRing.relay` set (:meth:`~stalwart.master.state.MasterState.join_workers`), each
record this process logs is also sent to the other workers (:func:`encode_relayed`), which
:meth:`LogRing.append` it as it arrives (:func:`decode_relayed`). Ids stay each ring's own, in
the order that worker saw the records; a record whose message is longer than
:data:`RELAYED_MESSAGE_BYTES` reaches the other workers cut there.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from itertools import islice

__all__ = [
    "DEFAULT_CAPACITY",
    "RELAYED_MESSAGE_BYTES",
    "RELAY_KIND",
    "LogEntry",
    "LogRing",
    "decode_relayed",
    "encode_relayed",
    "level_name",
]

DEFAULT_CAPACITY = 10_000
RELAYED_MESSAGE_BYTES = 48 * 1024
"""The longest message (UTF-8 bytes) sent whole to the other workers: a relayed record must fit
one datagram (the relay reads 64 KiB)."""
RELAY_KIND = b"l"
"""The first byte of a relayed record (:class:`~stalwart.master.coordination.Relay` messages
are told apart by it)."""


def level_name(levelno: int) -> str:
    """Determined's ``LOG_LEVEL_*`` name of a :mod:`logging` level (the nearest one below)."""
    if levelno >= logging.CRITICAL:
        return "LOG_LEVEL_CRITICAL"
    if levelno >= logging.ERROR:
        return "LOG_LEVEL_ERROR"
    if levelno >= logging.WARNING:
        return "LOG_LEVEL_WARNING"
    if levelno >= logging.INFO:
        return "LOG_LEVEL_INFO"
    if levelno >= logging.DEBUG:
        return "LOG_LEVEL_DEBUG"
    return "LOG_LEVEL_TRACE"


@dataclass(frozen=True)
class LogEntry:
    """One record as the ring keeps it."""

    id: int
    timestamp: dt.datetime
    level: str
    message: str


class _Formatter(logging.Formatter):
    """``<logger>: <message>``, then the traceback if any (no time or level: those are
    fields of the entry)."""

    def __init__(self) -> None:
        super().__init__("%(name)s: %(message)s")


class LogRing(logging.Handler):
    """A bounded, thread-safe ring of log entries with async followers (see the module)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, level: int = logging.NOTSET) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        super().__init__(level)
        self.setFormatter(_Formatter())
        self.capacity = capacity
        self._entries: deque[LogEntry] = deque(maxlen=capacity)
        self._last_id = 0
        self._guard = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._stopped = False
        self.relay: Callable[[bytes], None] | None = None
        """Sends each record this process logs to the other workers (module docstring); it
        must not block or raise (:meth:`~stalwart.master.coordination.Relay.send`)."""

    # -- writing -------------------------------------------------------------------------------

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            when = dt.datetime.fromtimestamp(record.created, tz=dt.UTC)
            entry = self.append(when, level_name(record.levelno), message)
            relay = self.relay
            if relay is not None:
                relay(encode_relayed(entry))
        except Exception:
            self.handleError(record)

    def append(self, timestamp: dt.datetime, level: str, message: str) -> LogEntry:
        """Add one entry (evicting the oldest when full) and wake the followers."""
        with self._guard:
            self._last_id += 1
            entry = LogEntry(self._last_id, timestamp, level, message)
            self._entries.append(entry)
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            with suppress(RuntimeError):  # that loop is closed: its waiter is gone too
                loop.call_soon_threadsafe(event.set)
        return entry

    # -- reading -------------------------------------------------------------------------------

    @property
    def last_id(self) -> int:
        """Id of the newest entry ever appended (0 before the first)."""
        with self._guard:
            return self._last_id

    def read(self, offset: int = 0, limit: int = 0) -> list[LogEntry]:
        """Entries in id order, Determined's ``offset`` / ``limit`` way.

        ``offset`` >= 0 skips that many records counted from the first the master ever logged
        (so the entries with ids above ``offset``; the ones evicted are gone); a negative
        ``offset`` keeps only the last ``-offset`` entries. ``limit`` > 0 returns at most that
        many, 0 all.
        """
        with self._guard:
            kept = len(self._entries)
            take = min(-offset, kept) if offset < 0 else max(0, min(kept, self._last_id - offset))
            entries = list(islice(reversed(self._entries), take))
        entries.reverse()
        return entries[:limit] if limit > 0 else entries

    def after(self, entry_id: int, limit: int = 0) -> list[LogEntry]:
        """Entries newer than ``entry_id`` (at most ``limit`` when > 0), oldest first."""
        return self.read(max(entry_id, 0), limit)

    @property
    def followers_stopped(self) -> bool:
        """Whether :meth:`stop_followers` was called (the master is stopping)."""
        return self._stopped

    def stop_followers(self) -> None:
        """Wake every :meth:`wait_after` now; later ones return at once (the master stops and
        follows end)."""
        with self._guard:
            self._stopped = True
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            with suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)

    async def wait_after(self, entry_id: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until an entry newer than ``entry_id`` exists;
        True then, False on timeout or once followers are stopped. Never misses an entry
        appended while it registers."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self._guard:
            if self._last_id > entry_id:
                return True
            if self._stopped:
                return False
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._guard:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    # -- installing ----------------------------------------------------------------------------

    @contextmanager
    def attached(self, logger: logging.Logger | None = None) -> Iterator[LogRing]:
        """Receive ``logger``'s records (the root logger's by default) while in the block."""
        target = logger if logger is not None else logging.getLogger()
        target.addHandler(self)
        try:
            yield self
        finally:
            target.removeHandler(self)


def encode_relayed(entry: LogEntry) -> bytes:
    """``entry`` as a relay message for the other workers (its id is not sent: each ring
    numbers what it receives)."""
    message = entry.message.encode("utf-8")
    if len(message) > RELAYED_MESSAGE_BYTES:
        message = message[:RELAYED_MESSAGE_BYTES]
    body = {
        "time": entry.timestamp.timestamp(),
        "level": entry.level,
        "message": message.decode("utf-8", errors="ignore"),
    }
    return RELAY_KIND + json.dumps(body).encode()


def decode_relayed(message: bytes) -> tuple[dt.datetime, str, str]:
    """The timestamp, level and message of a relay message made by :func:`encode_relayed`
    (ValueError when it is not one)."""
    if not message.startswith(RELAY_KIND):
        raise ValueError("not a relayed log record")
    body = json.loads(message[len(RELAY_KIND) :])
    when = dt.datetime.fromtimestamp(float(body["time"]), tz=dt.UTC)
    return when, str(body["level"]), str(body["message"])
