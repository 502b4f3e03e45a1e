"""Container output as log entries: parsing, and one bounded queue per container.

- Each line becomes one entry (``ship_logs.py``'s shape, wire doc 5.1): a leading ``[rank=N] ``
  becomes ``rank_id`` and a following ``LEVEL: `` becomes ``level`` (``LOG_LEVEL_<X>``); both
  prefixes leave the text, which keeps its trailing newline.
- Every container has its own ordered :class:`ContainerLog` queue (thread-safe), which
  :class:`~stalwart.agent.shipper.LogShipper` posts with that container's allocation token. A
  queue keeps at most ``max_lines`` entries and drops the oldest beyond, saying so in the
  agent's log.
- :meth:`ContainerLog.mark` / :meth:`ContainerLog.flushed` let the daemon wait until a
  container's lines are shipped (or dropped) before it reports the container's exit; or
  :meth:`ContainerLog.hand_over` takes the last lines from the shipper so that they travel with
  the exit report itself.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from stalwart.agent.protocol import LogLine
from stalwart.agent.runner import Stdtype

__all__ = ["MASK", "ContainerLog", "Entry", "LogContext", "SecretMask", "as_log_line", "parse_line"]

log = logging.getLogger(__name__)

_RANK = re.compile(r" ?\[rank=([0-9]+)\] ?")
_LEVEL = re.compile(r" ?(DEBUG|INFO|WARNING|ERROR|CRITICAL): ?")

Entry = dict[str, Any]


def parse_line(line: str) -> tuple[str, int | None, str | None]:
    """``(text, rank_id, level)`` of one output line (see the module docstring)."""
    rank = level = None
    match = _RANK.match(line)
    if match:
        rank, line = int(match.group(1)), line[match.end() :]
    match = _LEVEL.match(line)
    if match:
        level, line = f"LOG_LEVEL_{match.group(1)}", line[match.end() :]
    return line, rank, level


def as_log_line(entry: Entry) -> LogLine:
    """A queued entry as it travels with an exit report (the master adds the task)."""
    return LogLine(
        log=entry["log"],
        timestamp=entry["timestamp"],
        container_id=entry["container_id"],
        level=entry.get("level"),
        stdtype=entry.get("stdtype"),
        source=entry.get("source"),
        rank_id=entry.get("rank_id"),
    )


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


MASK = "********"


class SecretMask:
    """The agent's own secrets (its tokens), masked in every line it ships: a task that
    printed one (it should not be able to read them; see :mod:`stalwart.agent.identity`) does
    not publish it to every viewer of its log. :meth:`add` may be called from any thread."""

    def __init__(self, *secrets: str) -> None:
        self._secrets: tuple[str, ...] = ()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        """Mask ``secret`` from now on (empty and very short strings are ignored)."""
        if len(secret) >= 8 and secret not in self._secrets:
            self._secrets = tuple(sorted({*self._secrets, secret}, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


@dataclass(frozen=True)
class LogContext:
    """Who a container's lines belong to, and the token they are posted with."""

    task_id: str
    allocation_id: str
    agent_id: str
    container_id: str
    token: str


class ContainerLog:
    """One container's ordered, bounded queue of entries (thread-safe)."""

    def __init__(
        self,
        context: LogContext,
        *,
        max_lines: int,
        batch_lines: int,
        wake: threading.Event,
        mask: SecretMask | None = None,
    ) -> None:
        self.context = context
        self._mask = mask or SecretMask()
        self._max = max_lines
        self._batch = batch_lines
        self._wake = wake
        self._lock = threading.Lock()
        self._queue: deque[tuple[int, Entry]] = deque()
        self._last = 0  # sequence number of the newest entry
        self._done = 0  # every entry up to this one is shipped or dropped
        self.dropped = 0  # dropped and not yet reported
        self.released = False
        self._shipping = False  # the shipper holds a batch it has peeked and not settled

    def line(self, text: str, stdtype: Stdtype) -> None:
        """Add one output line (an :data:`~stalwart.agent.runner.OutputSink`)."""
        body, rank, level = parse_line(self._mask(text))
        entry: Entry = {"log": body, "stdtype": stdtype, "source": "task"}
        if rank is not None:
            entry["rank_id"] = rank
        if level is not None:
            entry["level"] = level
        self._add(entry)

    def agent_line(self, text: str, level: str = "LOG_LEVEL_INFO") -> None:
        """Add a line written by the agent about the container (source ``agent``)."""
        self._add({"log": text.rstrip("\n") + "\n", "source": "agent", "level": level})

    def _add(self, entry: Entry) -> None:
        ctx = self.context
        entry.update(
            timestamp=_now(),
            task_id=ctx.task_id,
            allocation_id=ctx.allocation_id,
            agent_id=ctx.agent_id,
            container_id=ctx.container_id,
        )
        with self._lock:
            self._last += 1
            self._queue.append((self._last, entry))
            if len(self._queue) > self._max:
                seq, _ = self._queue.popleft()
                self._done = max(self._done, seq)
                if self.dropped == 0:
                    log.warning(
                        "log buffer of container %s is full (%d lines): dropping the oldest",
                        ctx.container_id,
                        self._max,
                    )
                self.dropped += 1
            size = len(self._queue)
        if size % self._batch == 0:
            self._wake.set()  # a full batch: ship it now

    def mark(self) -> int:
        """The sequence number of the newest entry so far."""
        with self._lock:
            return self._last

    def flushed(self, mark: int) -> bool:
        """Whether every entry up to ``mark`` has been shipped or dropped."""
        with self._lock:
            return self._done >= mark

    def take_dropped(self) -> int:
        """How many entries were dropped since the last call."""
        with self._lock:
            dropped, self.dropped = self.dropped, 0
            return dropped

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def peek(self, limit: int) -> list[tuple[int, Entry]]:
        """The shipper's next batch (at most ``limit``); it must :meth:`settle` it after."""
        with self._lock:
            batch = [self._queue[i] for i in range(min(limit, len(self._queue)))]
            self._shipping = bool(batch)
            return batch

    def done_through(self, seq: int) -> None:
        """Remove the entries up to ``seq`` (shipped or refused)."""
        with self._lock:
            while self._queue and self._queue[0][0] <= seq:
                self._queue.popleft()
            self._done = max(self._done, seq)

    def settle(self) -> None:
        """The shipper is done with its peeked batch (posted, refused or to be retried)."""
        with self._lock:
            self._shipping = False

    def hand_over(self, limit: int) -> list[Entry] | None:
        """Take every queued entry away from the shipper, to send with the exit report.

        None (nothing taken; the shipper carries on) while the shipper is posting a batch or
        more than ``limit`` entries are queued: try again later. Lines added afterwards are
        shipped as usual.
        """
        with self._lock:
            if self._shipping or len(self._queue) > limit:
                return None
            entries = [entry for _, entry in self._queue]
            self._queue.clear()
            self._done = self._last
            return entries
