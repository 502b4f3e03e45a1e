"""PreemptContext against a real master: the long-poll flips should_preempt, the ack is recorded,
close stops the watcher at once."""

from __future__ import annotations

import threading
import time

import pytest

from stalwart.core import (
    DummyDistributedContext,
    LocalPreemptContext,
    PreemptContext,
    PreemptMode,
    TaskEnv,
)
from stalwart.core._client import Session
from stalwart.core._context import build_context
from stalwart.master.db.tables import Allocation
from stalwart.master.services.allocations import signal_preemption
from tests.core.conftest import FAST_RETRY, MasterServer

SIGNAL_TIMEOUT_S = 10.0


def wait_for_preempt(preempt: PreemptContext) -> bool:
    """Poll should_preempt() (a cheap flag read) until True or the timeout."""
    deadline = time.monotonic() + SIGNAL_TIMEOUT_S
    while time.monotonic() < deadline:
        if preempt.should_preempt():
            return True
        time.sleep(0.01)
    return False


def acked(master: MasterServer, allocation_id: str) -> bool:
    with master.state.sessions() as session:
        row = session.get(Allocation, allocation_id)
        assert row is not None
        return bool(row.preempt_acked)


def test_signal_flips_should_preempt_and_is_acked(master: MasterServer, trial_env: TaskEnv) -> None:
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        assert ctx.preempt.should_preempt() is False
        assert not acked(master, trial_env.allocation_id)
        signal_preemption(master.state.sessions, master.state.notifier, trial_env.allocation_id)
        assert wait_for_preempt(ctx.preempt)
        assert acked(master, trial_env.allocation_id)
        assert ctx.preempt.should_preempt() is True  # stays True


def test_auto_ack_off_then_by_hand(master: MasterServer, trial_env: TaskEnv) -> None:
    signal_preemption(master.state.sessions, master.state.notifier, trial_env.allocation_id)
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        assert ctx.preempt.should_preempt(auto_ack=False) is True
        assert not acked(master, trial_env.allocation_id)
        ctx.preempt.acknowledge_preemption_signal()
        assert acked(master, trial_env.allocation_id)


def test_close_stops_the_long_poll_at_once(master: MasterServer, trial_env: TaskEnv) -> None:
    session = Session(trial_env.master_url, trial_env.session_token, retry=FAST_RETRY)
    preempt = PreemptContext(session, trial_env.allocation_id, DummyDistributedContext())
    preempt.start()
    assert preempt.should_preempt() is False  # the first answer came; a long poll is next
    # the watcher by its name: the in-process master may start threads of its own meanwhile
    name = f"stalwart-preempt-{trial_env.allocation_id}"
    watchers = [t for t in threading.enumerate() if t.name == name]
    assert len(watchers) == 1
    preempt.close()  # joins the watcher for at most 5 s; an uncut 60 s poll would outlive it
    assert not watchers[0].is_alive()
    session.close()


def test_a_task_that_never_asks_never_polls(master: MasterServer, trial_env: TaskEnv) -> None:
    """The watcher starts at the first should_preempt(): a task that never asks costs the
    master no request; one that asks gets the current answer at once, signal included."""
    name = f"stalwart-preempt-{trial_env.allocation_id}"
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
        assert not [t for t in threading.enumerate() if t.name == name]
        signal_preemption(master.state.sessions, master.state.notifier, trial_env.allocation_id)
        assert ctx.preempt.should_preempt() is True  # the first answer is waited for
    assert acked(master, trial_env.allocation_id)


def test_should_preempt_needs_start(master: MasterServer, trial_env: TaskEnv) -> None:
    session = Session(trial_env.master_url, trial_env.session_token)
    preempt = PreemptContext(session, trial_env.allocation_id, DummyDistributedContext())
    with pytest.raises(RuntimeError, match=r"before PreemptContext\.start"):
        preempt.should_preempt()
    preempt.start()
    with pytest.raises(RuntimeError, match="multiple times"):
        preempt.start()
    preempt.close()
    session.close()


def test_local_preempt_is_never_preempted() -> None:
    preempt = LocalPreemptContext(DummyDistributedContext(), PreemptMode.ChiefOnly)
    with preempt:
        assert preempt.should_preempt() is False
        preempt.acknowledge_preemption_signal()


def test_chief_only_refuses_workers() -> None:
    worker = DummyDistributedContext()
    worker.rank = worker.local_rank = 1  # a worker's view: ChiefOnly refuses before any collective
    session = Session("http://127.0.0.1:9", "token")
    preempt = PreemptContext(session, "1.x.1", worker, PreemptMode.ChiefOnly)
    preempt.start()
    with pytest.raises(RuntimeError, match="ChiefOnly"):
        preempt.should_preempt()
    preempt.close()
    session.close()
