"""The master's long-lived objects, built once by the app's lifespan and passed down."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from stalwart.master.clock import Clock, SystemClock
from stalwart.master.coordination import (
    Relay,
    SharedCounters,
    StateLock,
    relay_dir,
    run_dir,
)
from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Container
from stalwart.master.logring import RELAY_KIND, LogRing, decode_relayed
from stalwart.master.services.prepull import PrepullPlans
from stalwart.master.settings import MasterSettings
from stalwart.master.transitions import EventBus

if TYPE_CHECKING:
    from stalwart.master.rm.base import ResourceManager

__all__ = [
    "ROUND_KEY",
    "ClusterHints",
    "MasterState",
    "Notifier",
    "agent_key",
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

    :meth:`close` (the master is stopping, in the event loop) wakes every wait, and every later
    wait returns at once as on a timeout: long-polls answer what they have, and loops that
    wait again (log follows, the preemption long-poll) check :attr:`closed` and end.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._lock = threading.Lock()
        self._closed = False
        self.relay: Callable[[bytes], None] | None = None
        """Sends each notification to the master's other workers too (set by
        :meth:`MasterState.join_workers`)."""

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the master is stopping)."""
        return self._closed

    def close(self) -> None:
        """Wake every wait now and end every later one at once (call in the event loop)."""
        self._closed = True
        with self._lock:
            events = [event for waiting in self._waiters.values() for event in waiting]
        for event in events:
            event.set()

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
                if remaining <= 0 or self._closed:
                    return False
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), remaining)
            return True

    async def wait_any(self, keys: list[str], timeout: float) -> bool:
        """Like :meth:`wait`, woken by a notification of any of ``keys``."""
        if self._closed:
            return False
        with self._listening(keys) as event:
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except TimeoutError:
                return False
            return not self._closed

    def listeners(self, key: str) -> int:
        """How many waits listen on ``key`` now (for tests and diagnostics)."""
        with self._lock:
            return len(self._waiters.get(key, ()))

    def notify(self, key: str) -> None:
        """Wake the waits on ``key`` here and, through :attr:`relay`, in the other workers."""
        self.notify_here(key)
        if self.relay is not None:
            self.relay(b"n" + key.encode())

    def notify_here(self, key: str) -> None:
        """Wake the waits on ``key`` in this process only."""
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
        self._poked = False
        self.event = threading.Event()
        self.counters = SharedCounters()
        """``rounds_begun`` and ``rounds_done``: shared by the workers of a multi-worker
        master (:meth:`MasterState.join_workers`)."""
        self.relay: Callable[[bytes], None] | None = None
        """Sends each hint to the master's other workers too (where the loop may run)."""

    @property
    def rounds_begun(self) -> int:
        """Rounds whose database phase (ending allocations, searchers, requests) has begun;
        counted under the state lock as that phase starts."""
        return self.counters.read()[0]

    @rounds_begun.setter
    def rounds_begun(self, value: int) -> None:
        self.counters.write(value, self.rounds_done)

    @property
    def rounds_done(self) -> int:
        """Rounds the cluster loop has finished, placements included (it notifies
        :data:`ROUND_KEY` after each). A change recorded under the state lock when
        ``rounds_begun`` was n is seen by every round past n: waiting for ``rounds_done > n``
        waits for a round that acted on it."""
        return self.counters.read()[1]

    @rounds_done.setter
    def rounds_done(self, value: int) -> None:
        self.counters.write(self.rounds_begun, value)

    def experiment(self, experiment_id: int) -> None:
        """The experiment has news for its searcher (created, validated, state changed)."""
        self.experiment_here(experiment_id)
        if self.relay is not None:
            self.relay(b"e%d" % experiment_id)

    def experiment_here(self, experiment_id: int) -> None:
        """:meth:`experiment`, in this process only."""
        with self._lock:
            self._experiments.add(experiment_id)
        self.event.set()

    def poke(self) -> None:
        """Something the scheduler cares about changed (an exit, an agent, a pause...)."""
        self.poke_here()
        if self.relay is not None:
            self.relay(b"p")

    def poke_here(self) -> None:
        """:meth:`poke`, in this process only."""
        with self._lock:
            self._poked = True
        self.event.set()

    def take_poked(self) -> bool:
        """Whether :meth:`poke` was called since the last call (and forget it)."""
        with self._lock:
            poked, self._poked = self._poked, False
        return poked

    def take_experiments(self) -> set[int]:
        """The hinted experiments since the last call (and forget them)."""
        with self._lock:
            taken, self._experiments = self._experiments, set()
        return taken


class WakeEvent(threading.Event):
    """A ``threading.Event`` whose :meth:`set` also reaches the master's other workers
    (through :attr:`relay`); :meth:`set_here` sets it in this process only."""

    def __init__(self) -> None:
        super().__init__()
        self.relay: Callable[[bytes], None] | None = None

    def set(self) -> None:
        super().set()
        if self.relay is not None:
            self.relay(b"w")

    def set_here(self) -> None:
        super().set()


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
    """The cluster's enrollment token (``cluster.agent_token`` or the generated one): it
    enrolls agent ids without a credential; enrolled agents sync with their own tokens."""
    validation_wakes: dict[int, bool] = field(default_factory=dict)
    """Per experiment: whether its trials' validations wake the cluster loop
    (:func:`~stalwart.master.cluster.search.validations_wake_searcher`)."""
    lifecycle: StateLock = field(default_factory=StateLock)
    """The state lock. Held by whatever changes experiment, trial, allocation or container
    states (the cluster loop's database phases, resource managers' records, agent syncs,
    users' state actions) so their read-decide-write steps never interleave.

    Contract: hold it for short database work only (:meth:`step`), never around an engine
    call (a subprocess such as ``sbatch``, an HTTP call to Kubernetes, a sleep or a retry):
    while an engine is slow or hung, pausing, killing and agent syncs must still be answered.
    It is reentrant, so a step may call code that takes it again. In a master with several
    workers it excludes the other workers too (:meth:`join_workers`)."""
    clock: Clock = field(default_factory=SystemClock)
    """Where the cluster loop and the resource managers read the time (tests drive a
    :class:`~stalwart.master.clock.ManualClock`)."""
    serving_since: float | None = None
    """When (:attr:`clock`'s monotonic time) this master began answering requests, or None
    while it is still starting. Agents' grace after a master restart counts from it: an agent
    cannot sync before the master listens. ``open_state`` sets it at once (a state used
    without a server serves its callers from the start); the app's lifespan clears it while it
    starts and sets it as the server begins listening."""
    webhook_wake: WakeEvent = field(default_factory=WakeEvent)
    """Set after a commit that added webhook deliveries: wakes the deliverer
    (:mod:`stalwart.master.cluster.webhooks`)."""
    rm: ResourceManager = field(init=False)
    """The resource manager, built once from ``settings.resource_manager`` by
    ``open_state``; the loop and the API ask it for what they need."""
    prepull: PrepullPlans = field(init=False)
    """The agent pools' pre-pull plan (sent with every agent sync); it reads :attr:`clock`."""

    def join_workers(self) -> Relay:
        """Make this state one of the workers of a multi-worker master (see
        :mod:`stalwart.master.coordination`): the state lock excludes the other workers, the
        loop's round counters are shared, and notifications, loop hints and webhook wakes
        reach every worker. Returns the started :class:`Relay` (close it as the worker stops).
        Call before serving, with no state step in progress."""
        run = run_dir(self.settings.home)
        self.lifecycle = StateLock(run / "state.lock")
        self.hints.counters = SharedCounters(run / "rounds")
        relay = Relay(relay_dir(self.settings.home), self._delivered)
        self.notifier.relay = relay.send
        self.hints.relay = relay.send
        self.webhook_wake.relay = relay.send
        self.log_ring.relay = relay.send
        relay.start()
        return relay

    def _delivered(self, message: bytes) -> None:
        """What another worker's :class:`Relay` sent: raise it here."""
        kind, body = message[:1], message[1:]
        if kind == b"n":
            self.notifier.notify_here(body.decode())
        elif kind == b"e":
            self.hints.experiment_here(int(body))
        elif kind == b"p":
            self.hints.poke_here()
        elif kind == b"w":
            self.webhook_wake.set_here()
        elif kind == RELAY_KIND:
            self.log_ring.append(*decode_relayed(message))

    def __post_init__(self) -> None:
        self.prepull = PrepullPlans.for_agents(
            self.settings.cluster.prepull, self.sessions, clock=lambda: self.clock.monotonic()
        )

    @contextlib.contextmanager
    def step(self) -> Iterator[Session]:
        """One database step under the state lock: a new session, closed (and the lock
        released) when the block ends. The block commits what it wants kept; committing wakes
        the log followers of tasks that got lines. No engine call inside (see
        :attr:`lifecycle`)."""
        with self.lifecycle, self.sessions() as session:
            yield session

    def wake(self, session: Session, allocation_ids: Iterable[str]) -> None:
        """After a commit that signalled ``allocation_ids`` (preempt, kill): wake their
        long-polls and the agents that run them (read through ``session``)."""
        ids = sorted(set(allocation_ids))
        if not ids:
            return
        for allocation_id in ids:
            self.notifier.notify(allocation_key(allocation_id))
        agents = session.scalars(
            select(Container.agent_id).where(Container.allocation_id.in_(ids)).distinct()
        )
        for agent_id in list(agents):
            self.notifier.notify(agent_key(agent_id))


def agent_key(agent_id: str) -> str:
    """Notifier key that wakes an agent's long-poll."""
    return f"agent:{agent_id}"


def allocation_key(allocation_id: str) -> str:
    """Notifier key of an allocation's signals (preemption set, rendezvous progress)."""
    return f"allocation:{allocation_id}"


def task_logs_key(task_id: str) -> str:
    """Notifier key woken when a task gets new log lines or ends."""
    return f"task-logs:{task_id}"
