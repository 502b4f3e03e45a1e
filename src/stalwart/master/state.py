"""The master's long-lived objects, built once by the app's lifespan and passed down."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import Engine

from stalwart.master.db.engine import SessionFactory
from stalwart.master.logring import LogRing
from stalwart.master.services.prepull import PrepullPlans
from stalwart.master.settings import MasterSettings
from stalwart.master.transitions import EventBus

__all__ = [
    "ROUND_KEY",
    "ClusterHints",
    "MasterState",
    "Notifier",
    "allocation_key",
    "task_logs_key",
]

ROUND_KEY = "cluster:round"
"""Notified after each round of the cluster loop."""


class Notifier:
    """Wakes async waiters (log followers, preemption long-polls) when a key changes.

    ``notify`` may be called from any thread; ``wait`` returns True when notified and False on
    timeout. A notification before ``wait`` is not remembered: callers re-read state after
    waking and before waiting again.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._lock = threading.Lock()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to the server's event loop (done by the app's lifespan)."""
        self._loop = loop

    async def wait(self, key: str, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notification of ``key``."""
        return await self.wait_any([key], timeout)

    @contextlib.contextmanager
    def _listening(self, keys: list[str]) -> Iterator[asyncio.Event]:
        """An event set by every notification of ``keys`` while the block runs."""
        event = asyncio.Event()
        with self._lock:
            for key in keys:
                self._waiters[key].add(event)
        try:
            yield event
        finally:
            with self._lock:
                for key in keys:
                    self._waiters[key].discard(event)
                    if not self._waiters[key]:
                        del self._waiters[key]

    async def wait_until(self, keys: list[str], done: Callable[[], bool], timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until ``done()`` holds, checking it after each
        notification of any of ``keys``; no notification is missed between checks."""
        deadline = time.monotonic() + timeout
        with self._listening(keys) as event:
            while not done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), remaining)
            return True

    async def wait_any(self, keys: list[str], timeout: float) -> bool:
        """Like :meth:`wait`, woken by a notification of any of ``keys``."""
        with self._listening(keys) as event:
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except TimeoutError:
                return False
            return True

    def listeners(self, key: str) -> int:
        """How many waits listen on ``key`` now (for tests and diagnostics)."""
        with self._lock:
            return len(self._waiters.get(key, ()))

    def notify(self, key: str) -> None:
        with self._lock:
            events = list(self._waiters.get(key, ()))
        loop = self._loop
        if not events or loop is None:
            return
        for event in events:
            loop.call_soon_threadsafe(event.set)


class ClusterHints:
    """What the API tells the cluster loop: experiments to look at, and "something changed".

    Hints only speed the loop up; the database stays the truth (the loop also sweeps every
    experiment now and then). Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._experiments: set[int] = set()
        self.event = threading.Event()
        self.rounds_done = 0
        """Rounds the cluster loop has finished (it notifies :data:`ROUND_KEY` after each)."""

    def experiment(self, experiment_id: int) -> None:
        """The experiment has news for its searcher (created, validated, state changed)."""
        with self._lock:
            self._experiments.add(experiment_id)
        self.event.set()

    def poke(self) -> None:
        """Something the scheduler cares about changed (an exit, an agent, a pause...)."""
        self.event.set()

    def take_experiments(self) -> set[int]:
        """The hinted experiments since the last call (and forget them)."""
        with self._lock:
            taken, self._experiments = self._experiments, set()
        return taken


@dataclass
class MasterState:
    """Settings, database and in-process buses of one running master."""

    settings: MasterSettings
    engine: Engine
    sessions: SessionFactory
    bus: EventBus = field(default_factory=EventBus)
    notifier: Notifier = field(default_factory=Notifier)
    hints: ClusterHints = field(default_factory=ClusterHints)
    log_ring: LogRing = field(default_factory=LogRing)
    """The master's own recent log records (``/api/v1/master/logs``); the app's lifespan
    attaches it to the root logger."""
    master_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    cluster_id: str = ""
    agent_token: str = ""
    agent_reports: dict[str, object] = field(default_factory=dict)
    """The last report each agent registered with through this master: a sync repeating it
    only heartbeats (:func:`~stalwart.master.cluster.agent_sync.apply_sync`)."""
    lifecycle: threading.RLock = field(default_factory=threading.RLock)
    """Held by whatever changes experiment, trial or allocation states (the cluster loop's
    rounds, agent syncs, users' state actions) so their read-decide-write steps never
    interleave. Hold it for one short transaction at a time; never around network calls."""
    prepull: PrepullPlans = field(init=False)
    """The agent pools' pre-pull plan (sent with every agent sync)."""

    def __post_init__(self) -> None:
        self.prepull = PrepullPlans.for_agents(self.settings.cluster.prepull, self.sessions)


def allocation_key(allocation_id: str) -> str:
    """Notifier key of an allocation's signals (preemption set, rendezvous progress)."""
    return f"allocation:{allocation_id}"


def task_logs_key(task_id: str) -> str:
    """Notifier key woken when a task gets new log lines or ends."""
    return f"task-logs:{task_id}"
