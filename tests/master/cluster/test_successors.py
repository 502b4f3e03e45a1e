"""Queued successors through the cluster loop: a random search's next trials wait behind its
running ones on their slots, the agent starts each the moment its predecessor exits, and
``max_concurrent_trials`` is never exceeded.

The test plays the agent (as tests/master/cluster/test_loop.py does), here one that honours
``TaskSpec.after`` as the real agent does (tests/agent/test_daemon.py runs that with real
processes): a queued successor is reported QUEUED until its predecessor exits, then RUNNING.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from stalwart.agent.protocol import SyncResponse
from stalwart.master.app import open_state
from stalwart.master.clock import ManualClock
from stalwart.master.cluster.loop import ClusterLoop
from stalwart.master.db.tables import Allocation, Container, Slot, Trial
from stalwart.master.services import experiments as exp_svc
from stalwart.master.services.allocations import ack_preemption
from stalwart.master.state import MasterState
from tests.master.cluster.test_loop import (
    RANDOM_4,
    SINGLE,
    FakeNode,
    _create,
    _exp_state,
    _trials,
)
from tests.master.conftest import make_settings

RANDOM = RANDOM_4.replace("max_trials: 8", "max_trials: 7").replace(
    "max_concurrent_trials: 4", "max_concurrent_trials: 2"
)


def _state(tmp_path: Path, **cluster: object) -> MasterState:
    return open_state(make_settings(tmp_path / "home", cluster={"agent_timeout": 60, **cluster}))


@pytest.fixture
def state(tmp_path: Path) -> Iterator[MasterState]:
    st = _state(tmp_path)
    try:
        yield st
    finally:
        st.engine.dispose()


class QueueingNode(FakeNode):
    """A node that holds a queued successor until its predecessor exits, as the agent does."""

    def sync(self) -> SyncResponse:
        response = super().sync()
        for spec in response.start:
            after = spec.after
            if after is not None and self._runs(after):
                key = (spec.allocation_id, spec.rank)
                self.containers[key] = self.containers[key].model_copy(update={"state": "QUEUED"})
        return response

    def _runs(self, allocation_id: str) -> bool:
        return any(
            aid == allocation_id and status.state == "RUNNING"
            for (aid, _), status in self.containers.items()
        )

    def exit(self, allocation_id: str, code: int | None) -> None:
        super().exit(allocation_id, code)
        for key, status in list(self.containers.items()):
            if status.state == "QUEUED" and self.after[key[0]] == allocation_id:
                self.containers[key] = status.model_copy(update={"state": "RUNNING"})

    @property
    def after(self) -> dict[str, str | None]:
        with self.state.sessions() as session:
            return {a.id: a.after_allocation_id for a in session.scalars(select(Allocation))}

    def running(self) -> list[str]:
        return sorted(aid for (aid, _), s in self.containers.items() if s.state == "RUNNING")

    def queued(self) -> list[str]:
        return sorted(aid for (aid, _), s in self.containers.items() if s.state == "QUEUED")


def _holders(state: MasterState) -> dict[str, str | None]:
    with state.sessions() as session:
        return {s.slot_id: s.allocation_id for s in session.scalars(select(Slot))}


def _queued_behind(state: MasterState) -> dict[str, str]:
    with state.sessions() as session:
        queued = select(Allocation).where(Allocation.after_allocation_id.is_not(None))
        rows = session.scalars(queued)
        return {a.id: str(a.after_allocation_id) for a in rows if a.state != "TERMINATED"}


def _settle(loop: ClusterLoop, node: QueueingNode) -> None:
    """Report, run a round, take its answer (twice: a pairing needs its predecessor RUNNING)."""
    for _ in range(2):
        node.sync()
        loop.run_round()
        node.sync()


def _started(state: MasterState, text: str = RANDOM) -> tuple[ClusterLoop, QueueingNode, int]:
    """A loop, a two-slot node and a new experiment, settled: its first trials run."""
    loop, node = ClusterLoop(state), QueueingNode(state, slots=2)
    node.sync()
    exp_id = _create(state, text)
    _settle(loop, node)
    return loop, node, exp_id


def test_a_random_search_runs_each_next_trial_behind_a_running_one(state: MasterState) -> None:
    loop, node, exp_id = _started(state)
    first = node.running()
    assert len(first) == 2
    behind = _queued_behind(state)
    assert sorted(behind.values()) == first  # one successor queued behind each running trial
    assert node.queued() == sorted(behind)
    with state.sessions() as session:
        for successor, predecessor in behind.items():
            mine = session.scalars(select(Container).where(Container.allocation_id == successor))
            theirs = session.scalars(
                select(Container).where(Container.allocation_id == predecessor)
            )
            (queued,), (running,) = list(mine), list(theirs)
            assert (queued.agent_id, queued.slot_ids) == (running.agent_id, running.slot_ids)
            assert queued.spec["after"] == predecessor
    assert len(_trials(state, exp_id)) == 4  # two running, two created ahead

    # The first trial exits: the node starts its successor at once, before the master knows.
    predecessor = first[0]
    successor = next(s for s, p in behind.items() if p == predecessor)
    node.exit(predecessor, 0)
    assert node.running() == sorted([first[1], successor])
    slot = next(k for k, v in _holders(state).items() if v == predecessor)
    node.sync()
    loop.run_round()  # ends the predecessor: its slot passes to the successor
    assert _holders(state)[slot] == successor
    assert successor not in _queued_behind(state)
    node.sync()
    (following,) = [a for a, p in _queued_behind(state).items() if p == successor]
    assert following in node.queued()  # the next trial already waits behind it

    # Run the search out: never more than two trials run, every trial runs once.
    most = 0
    while _exp_state(state, exp_id) != "COMPLETED":
        for allocation_id in node.running():
            node.exit(allocation_id, 0)
            most = max(most, len(node.running()))
        _settle(loop, node)
    assert most <= 2
    trials = _trials(state, exp_id)
    assert [t.state for t in trials] == ["COMPLETED"] * 7
    with state.sessions() as session:
        ran = session.scalars(select(Allocation.task_id)).all()
    assert sorted(ran) == sorted(t.task_id for t in trials)  # one allocation each
    assert set(_holders(state).values()) == {None}


def test_with_queue_successors_off_trials_are_created_as_others_exit(tmp_path: Path) -> None:
    state = _state(tmp_path, queue_successors=False)
    try:
        _, _, exp_id = _started(state)
        assert len(_trials(state, exp_id)) == 2
        assert _queued_behind(state) == {}
    finally:
        state.engine.dispose()


def test_pausing_ends_the_queued_successors_and_activating_runs_them(state: MasterState) -> None:
    loop, node, exp_id = _started(state)
    queued = node.queued()
    assert len(queued) == 2
    with state.sessions() as session:
        exp_svc.pause_experiment(session, exp_id)
        session.commit()
    loop.run_round()
    answer = node.sync()
    assert set(queued) <= set(answer.kill)
    assert not set(answer.kill) & set(node.running())  # the running ones are preempted
    for allocation_id in answer.kill:  # the agent: the queued ones never start
        node.exit(allocation_id, None)
    for allocation_id in node.running():  # the running ones checkpoint and exit
        with state.sessions() as session:
            ack_preemption(session, allocation_id)
            session.commit()
        node.exit(allocation_id, 0)
    assert node.running() == []  # nothing started in their place
    _settle(loop, node)
    assert node.running() == []
    assert _queued_behind(state) == {}
    assert set(_holders(state).values()) == {None}
    assert {t.state for t in _trials(state, exp_id)} == {"PAUSED"}
    with state.sessions() as session:
        exp_svc.activate_experiment(session, exp_id)
        session.commit()
    _settle(loop, node)
    assert len(node.running()) == 2


def test_a_lost_agent_s_queued_successors_end_and_their_trials_go_back_to_waiting(
    state: MasterState,
) -> None:
    clock = ManualClock()
    state.clock = clock
    state.serving_since = clock.monotonic()
    loop, _, exp_id = _started(state, RANDOM.replace("max_restarts: 0", "max_restarts: 2"))
    queued = set(_queued_behind(state))
    assert len(queued) == 2
    clock.advance(61)  # the node stays silent past agent_timeout
    loop.run_round()
    loop.run_round()
    with state.sessions() as session:
        ended = {a.id: a.state for a in session.scalars(select(Allocation))}
        waiting = session.scalars(
            select(Trial).where(Trial.experiment_id == exp_id, Trial.state == "ACTIVE")
        ).all()
    assert all(ended[a] == "TERMINATED" for a in queued)
    assert set(_holders(state).values()) == {None}
    assert len(waiting) == 4  # nothing lost: every trial waits for an agent again


def test_a_preempted_trial_s_queued_successor_is_withdrawn_and_the_urgent_job_gets_the_slot(
    tmp_path: Path,
) -> None:
    pools = [{"pool_name": "default", "scheduler": {"type": "priority", "preemption": True}}]
    state = open_state(
        make_settings(tmp_path / "home", cluster={"agent_timeout": 60}, resource_pools=pools)
    )
    try:
        loop, node, exp_id = _started(state)
        behind = _queued_behind(state)
        urgent = _create(state, SINGLE.replace("max_restarts: 1", "resources:\n  priority: 10"))
        loop.run_round()  # preempts one of the search's trials, withdraws its successor
        with state.sessions() as session:
            (preempted,) = session.scalars(
                select(Allocation).where(Allocation.preempt_requested.is_(True))
            ).all()
            withdrawn = next(s for s, p in behind.items() if p == preempted.id)
            gone = session.get(Allocation, withdrawn)
            assert gone is not None
            assert (gone.state, gone.after_allocation_id) == ("TERMINATED", None)
            ack_preemption(session, preempted.id)
            session.commit()
        assert withdrawn in node.sync().kill  # the agent drops it
        node.exit(withdrawn, None)
        node.exit(preempted.id, 0)  # checkpoints and gives the slot back
        assert withdrawn not in node.running()  # nothing took the slot in its place
        _settle(loop, node)
        with state.sessions() as session:
            placed = session.scalars(
                select(Allocation.task_id).where(Allocation.state != "TERMINATED")
            ).all()
            trial = session.scalars(
                select(Trial).where(Trial.task_id == withdrawn.rsplit(".", 1)[0])
            ).one()
        assert any(task.startswith(f"{urgent}.") for task in placed)  # the urgent job runs
        assert (trial.state, trial.restarts) == ("ACTIVE", 0)  # no consequence for the trial
        assert trial.task_id in placed  # it waits again with a new allocation
        assert len(_trials(state, exp_id)) == 4
    finally:
        state.engine.dispose()
