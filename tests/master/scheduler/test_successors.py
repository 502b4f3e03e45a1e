"""Queued successors: which waiting request queues behind which running one (pure)."""

from __future__ import annotations

from stalwart.master.scheduler import Decision, GroupLimits, Request, schedule
from stalwart.master.scheduler.successors import pair_successors
from tests.master.scheduler.helpers import agent, running, snapshot

AHEAD = GroupLimits("7", max_concurrent=2, successors=True)


def waiting(allocation_id: str, group_id: str = "7", slots: int = 1, **kw: object) -> Request:
    return Request(allocation_id, group_id, slots, **kw)  # type: ignore[arg-type]


def test_each_waiting_trial_queues_behind_its_own_running_trial_in_queue_order() -> None:
    snap = snapshot(
        [agent("a", 2), agent("b", 1)],
        [
            running("7.x.1", "7", {"a": [0]}),
            running("7.y.1", "7", {"b": [0]}),
            waiting("7.p.1"),
            waiting("7.q.1"),
            waiting("7.r.1"),  # a third waits: every running trial already has one
        ],
        groups=[AHEAD],
    )
    decision = schedule(snap)
    assert dict(decision.assignments) == {}  # the group runs its max_concurrent already
    assert pair_successors(snap, decision) == {"7.p.1": "7.x.1", "7.q.1": "7.y.1"}


def test_nothing_queues_without_the_group_s_consent_or_when_others_wait() -> None:
    requests = [running("7.x.1", "7", {"a": [0]}), waiting("7.p.1")]
    plain = snapshot([agent("a", 1)], requests, groups=[GroupLimits("7", max_concurrent=1)])
    assert pair_successors(plain, schedule(plain)) == {}
    # Another job waits for slots in the pool: the freed slot is the scheduler's to give.
    crowded = snapshot([agent("a", 1)], [*requests, waiting("9.z.1", "9")], groups=[AHEAD])
    assert pair_successors(crowded, schedule(crowded)) == {}
    # The round preempts in the pool: nothing queues there either.
    preempting = Decision(preemptions=("7.x.1",))
    assert pair_successors(snapshot([agent("a", 1)], requests, groups=[AHEAD]), preempting) == {}


def test_another_job_that_wants_slots_keeps_them_free_one_held_back_by_its_own_limit_not() -> None:
    """A higher-priority search below its own limit waits for the slot that frees next: it is
    the scheduler's to give, so nothing queues. A search that waits only because it runs its
    own max_concurrent_trials wants nothing, and both queue behind their own trials."""
    urgent = GroupLimits("8", max_concurrent=2, successors=True)
    mine = [running("7.x.1", "7", {"a": [0]}), waiting("7.p.1")]
    below = snapshot(
        [agent("a", 2)],
        [*mine, running("8.y.1", "8", {"a": [1]}), waiting("8.q.1", "8", priority=10)],
        groups=[AHEAD, urgent],
    )
    assert pair_successors(below, schedule(below)) == {}
    full = [GroupLimits(g, max_concurrent=1, successors=True) for g in ("7", "8")]
    at_cap = snapshot(
        [agent("a", 2)],
        [*mine, running("8.y.1", "8", {"a": [1]}), waiting("8.q.1", "8", priority=10)],
        groups=full,
    )
    assert pair_successors(at_cap, schedule(at_cap)) == {"7.p.1": "7.x.1", "8.q.1": "8.y.1"}
    # Below its limit, the search "7" wants the slot "8" frees: "8" queues nothing.
    mixed = snapshot(at_cap.agents, at_cap.requests, groups=[AHEAD, full[1]])
    assert pair_successors(mixed, schedule(mixed)) == {"7.p.1": "7.x.1"}


def test_only_a_running_trial_that_can_take_one_gets_a_successor() -> None:
    cases = {
        "has one": running("7.x.1", "7", {"a": [0]}, has_successor=True),
        "preempting": running("7.x.1", "7", {"a": [0]}, preempting=True),
        "two agents": running("7.x.1", "7", {"a": [0], "b": [0]}),
        "other size": running("7.x.1", "7", {"a": [0, 1]}),
    }
    for why, before in cases.items():
        snap = snapshot([agent("a", 2), agent("b", 1)], [before, waiting("7.p.1")], groups=[AHEAD])
        assert pair_successors(snap, Decision()) == {}, why
    draining = snapshot(
        [agent("a", 1, draining=True)],
        [running("7.x.1", "7", {"a": [0]}), waiting("7.p.1")],
        groups=[AHEAD],
    )
    assert pair_successors(draining, Decision()) == {}
    avoided = snapshot(
        [agent("a", 1)],
        [running("7.x.1", "7", {"a": [0]}), waiting("7.p.1", blocked_agents=frozenset({"a"}))],
        groups=[AHEAD],
    )
    assert pair_successors(avoided, Decision()) == {}


def test_a_request_placed_this_round_does_not_also_queue() -> None:
    snap = snapshot(
        [agent("a", 2)],
        [running("7.x.1", "7", {"a": [0]}), waiting("7.p.1"), waiting("7.q.1")],
        groups=[AHEAD],
    )
    decision = schedule(snap)
    assert list(decision.assignments) == ["7.p.1"]  # the free slot, within max_concurrent 2
    assert pair_successors(snap, decision) == {"7.q.1": "7.x.1"}
