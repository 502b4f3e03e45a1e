"""The primitives that keep a multi-worker master one master, across real processes
(:mod:`stalwart.master.coordination`): the state lock excludes another process, exactly one
process leads and another takes over when it dies, notifications cross processes, and the round
counters are shared."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from stalwart.master.app import open_state
from stalwart.master.coordination import (
    Leadership,
    Relay,
    SharedCounters,
    StateLock,
    relay_dir,
)
from stalwart.master.logring import RELAYED_MESSAGE_BYTES
from tests.master.conftest import make_settings

CTX = multiprocessing.get_context("fork")
WAIT_S = 20.0


def _hold_state_lock(path: Path, pipe: Connection) -> None:
    lock = StateLock(path)
    with lock, lock:  # reentrant: the inner hold changes nothing
        pipe.send("held")
        pipe.recv()  # hold until told
    pipe.send("released")
    pipe.recv()


def test_the_state_lock_excludes_another_process_until_it_releases(tmp_path: Path) -> None:
    path = tmp_path / "run" / "state.lock"
    ours, theirs = CTX.Pipe()
    child = CTX.Process(target=_hold_state_lock, args=(path, theirs))
    child.start()
    try:
        assert ours.poll(WAIT_S)
        assert ours.recv() == "held"
        lock = StateLock(path)
        acquired = threading.Event()

        def take() -> None:
            with lock:
                acquired.set()

        taker = threading.Thread(target=take)
        taker.start()
        assert not acquired.wait(0.5)  # the other process holds it
        ours.send("release")
        assert acquired.wait(WAIT_S)
        taker.join()
        assert ours.recv() == "released"
        ours.send("done")
    finally:
        child.join(WAIT_S)


def _lead(path: Path, pipe: Connection) -> None:
    led = threading.Event()
    Leadership(path, led.set).start()
    led.wait()
    pipe.send(os.getpid())
    threading.Event().wait()  # lead until killed


def test_one_process_leads_and_another_takes_over_when_it_dies(tmp_path: Path) -> None:
    path = tmp_path / "run" / "leader.lock"
    pipes = [CTX.Pipe() for _ in range(2)]
    children = [CTX.Process(target=_lead, args=(path, theirs)) for _, theirs in pipes]
    for child in children:
        child.start()
    try:
        ready = multiprocessing.connection.wait([ours for ours, _ in pipes], timeout=WAIT_S)
        assert len(ready) == 1  # exactly one leads
        (first,) = ready
        assert isinstance(first, Connection)
        leader = first.recv()
        assert isinstance(leader, int)
        assert path.read_text().strip() == str(leader)
        (waiting,) = [ours for ours, _ in pipes if ours is not first]
        assert not waiting.poll(2.5)  # the other only waits while the leader lives
        os.kill(leader, signal.SIGKILL)
        assert waiting.poll(WAIT_S)  # and leads once it died
        successor = waiting.recv()
        assert successor != leader
        assert path.read_text().strip() == str(successor)
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
            child.join(WAIT_S)


def _relay_echo(directory: Path, pipe: Connection) -> None:
    relay: Relay | None = None

    def deliver(message: bytes) -> None:
        assert relay is not None
        relay.send(b"echo:" + message)

    relay = Relay(directory, deliver)
    relay.start()
    pipe.send("ready")
    pipe.recv()
    relay.close()


def test_a_notification_reaches_every_other_process_and_not_the_sender(tmp_path: Path) -> None:
    directory = tmp_path / "run" / "workers"
    ours, theirs = CTX.Pipe()
    child = CTX.Process(target=_relay_echo, args=(directory, theirs))
    child.start()
    try:
        assert ours.poll(WAIT_S)
        assert ours.recv() == "ready"
        received: list[bytes] = []
        arrived = threading.Event()

        def deliver(message: bytes) -> None:
            received.append(message)
            arrived.set()

        relay = Relay(directory, deliver)
        relay.start()
        try:
            relay.send(b"ntask-logs:7")
            assert arrived.wait(WAIT_S)
            assert received == [b"echo:ntask-logs:7"]  # the echo, never our own message
        finally:
            relay.close()
        ours.send("done")
    finally:
        child.join(WAIT_S)
    assert list(directory.iterdir()) == []  # each removed its socket


def test_a_relay_forgets_the_socket_of_a_worker_that_is_gone(tmp_path: Path) -> None:
    directory = tmp_path / "workers"
    directory.mkdir()
    stale = directory / "99999999-0.sock"  # a worker SIGKILLed: its socket file stayed
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as dead:
        dead.bind(str(stale))
    relay = Relay(directory, lambda message: None)
    try:
        relay.send(b"p")
        assert not stale.exists()
    finally:
        relay.close()


def _count(path: Path, pipe: Connection) -> None:
    counters = SharedCounters(path)
    counters.write(3, 2)
    pipe.send("written")


def test_round_counters_written_in_one_process_are_read_in_another(tmp_path: Path) -> None:
    path = tmp_path / "run" / "rounds"
    ours = SharedCounters(path)
    assert ours.read() == (0, 0)
    mine, theirs = CTX.Pipe()
    child = CTX.Process(target=_count, args=(path, theirs))
    child.start()
    assert mine.poll(WAIT_S)
    assert mine.recv() == "written"
    child.join(WAIT_S)
    assert ours.read() == (3, 2)


@pytest.mark.parametrize("shared", [False, True])
def test_the_state_lock_is_reentrant_in_one_thread(tmp_path: Path, shared: bool) -> None:
    lock = StateLock(tmp_path / "state.lock" if shared else None)
    assert lock.shared is shared
    with lock:
        with lock:
            pass

        def take() -> None:
            with lock:
                pass

        other = threading.Thread(target=take)
        other.start()
        other.join(0.3)
        assert other.is_alive()  # another thread waits while we hold it
    other.join(WAIT_S)
    assert not other.is_alive()


def test_two_states_on_one_home_share_the_lock_the_hints_and_the_wake_ups(
    tmp_path: Path,
) -> None:
    """What a worker raises (a notifier key, a loop hint, a webhook wake, round counters) is
    seen by another worker's state on the same home (:meth:`MasterState.join_workers`), even
    when the home is too deep for a Unix socket's address in it."""
    home = tmp_path / ("deep-" * 12) / "home"
    assert relay_dir(home) != home / "run" / "workers"  # the sockets go elsewhere
    states = [open_state(make_settings(home)) for _ in range(2)]
    relays = [state.join_workers() for state in states]
    ours, theirs = states
    try:
        assert ours.lifecycle.shared

        async def notified() -> bool:
            theirs.notifier.bind(asyncio.get_running_loop())
            waiting = asyncio.ensure_future(theirs.notifier.wait("task-logs:t1", WAIT_S))
            while not theirs.notifier.listeners("task-logs:t1"):
                await asyncio.sleep(0.01)
            await asyncio.to_thread(ours.notifier.notify, "task-logs:t1")
            return await waiting

        assert asyncio.run(notified())
        ours.hints.experiment(5)
        assert theirs.hints.event.wait(WAIT_S)
        wait_for(lambda: theirs.hints.take_experiments() == {5})
        ours.webhook_wake.set()
        assert theirs.webhook_wake.wait(WAIT_S)
        ours.hints.rounds_begun = 4
        ours.hints.rounds_done = 3
        assert (theirs.hints.rounds_begun, theirs.hints.rounds_done) == (4, 3)
    finally:
        for relay in relays:
            relay.close()
        for state in states:
            state.engine.dispose()


def test_a_record_one_worker_logs_is_in_every_other_worker_s_master_log(
    tmp_path: Path,
) -> None:
    """``GET /master/logs`` answers from any worker's ring: each ring holds what every worker
    logged (relayed, not echoed back to the sender), a long record cut to fit a datagram."""
    home = tmp_path / "home"
    states = [open_state(make_settings(home)) for _ in range(3)]
    relays = [state.join_workers() for state in states]
    ours, *others = states
    logger = logging.getLogger("stalwart.test.worker-logs")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        with ours.log_ring.attached(logger):
            logger.warning("agent %s lost: no sync for %gs", "a1", 30.0)
            logger.info("x" * (RELAYED_MESSAGE_BYTES * 2))
        for state in others:
            wait_for(lambda state=state: len(state.log_ring.read()) == 2)  # type: ignore[misc]
            lost, long = state.log_ring.read()
            assert lost.message == "stalwart.test.worker-logs: agent a1 lost: no sync for 30s"
            assert lost.level == "LOG_LEVEL_WARNING"
            assert long.level == "LOG_LEVEL_INFO"
            assert long.message.startswith("stalwart.test.worker-logs: xxx")
            assert len(long.message) == RELAYED_MESSAGE_BYTES
            assert [e.id for e in state.log_ring.read()] == [1, 2]  # each ring numbers its own
        mine = ours.log_ring.read()
        assert [e.message[-5:] for e in mine] == ["r 30s", "xxxxx"]  # nothing came back twice
        assert len(mine[1].message) > RELAYED_MESSAGE_BYTES  # the sender keeps it whole
    finally:
        for relay in relays:
            relay.close()
        for state in states:
            state.engine.dispose()


def wait_for(check: Callable[[], bool]) -> None:
    """Wait for ``check()`` (a notification arrives in the receiving thread)."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_sockets_of_a_shallow_home_live_in_it_and_a_deep_home_s_in_a_private_directory(
    tmp_path: Path,
) -> None:
    assert relay_dir(Path("/srv/stalwart")) == Path("/srv/stalwart/run/workers")
    deep = tmp_path / ("x" * 90)
    elsewhere = relay_dir(deep)
    assert elsewhere == relay_dir(deep)  # every worker finds the same one
    assert elsewhere != relay_dir(tmp_path / ("y" * 90))  # another master's is another
    relay = Relay(elsewhere, lambda message: None)
    try:
        assert elsewhere.stat().st_mode & 0o777 == 0o700
    finally:
        relay.close()
