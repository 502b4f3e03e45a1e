"""The priority scheduler: queue order, holding for the blocked head, backfilling, preemption."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from stalwart.master.scheduler import (
    GroupLimits,
    PoolSettings,
    Request,
    Snapshot,
    placement_slots,
    queue_key,
    schedule,
)
from stalwart.master.scheduler.pool import ranks_ahead
from tests.master.scheduler.helpers import (
    agent,
    check_decision,
    fits_in,
    running,
    snapshot,
    snapshots,
)

PREEMPT = PoolSettings(preemption=True)


def test_smaller_priority_number_goes_first() -> None:
    snap = snapshot(
        [agent("a", 4)],
        [
            Request("low", "g1", 4, priority=50, submitted_order=1),
            Request("high", "g2", 4, priority=10, submitted_order=2),
        ],
    )
    assert set(schedule(snap).assignments) == {"high"}


def test_equal_priority_is_first_come_first_served() -> None:
    snap = snapshot(
        [agent("a", 4)],
        [
            Request("second", "g1", 3, submitted_order=2),
            Request("first", "g2", 3, submitted_order=1),
        ],
    )
    assert set(schedule(snap).assignments) == {"first"}


def test_a_blocked_gang_holds_the_placement_nearest_to_free_and_others_backfill_elsewhere() -> None:
    snap = snapshot(
        [agent("a", 4), agent("b", 4)],
        [
            running("ra", "g0", {"a": [0, 1]}),
            running("rb", "g0", {"b": [0]}),
            Request("gang", "g1", 4, submitted_order=1),
            Request("small1", "g2", 1, submitted_order=2),
            Request("small2", "g2", 1, submitted_order=3, priority=70),
            Request("small3", "g2", 1, submitted_order=4),
        ],
    )
    decision = schedule(snap)
    assert decision.reservations["gang"] == (("b", ("0", "1", "2", "3")),)
    # The held agent b keeps its three free slots; a's two free slots are backfilled in order.
    assert decision.assignments == {"small1": (("a", ("2",)),), "small3": (("a", ("3",)),)}


def test_lower_priority_work_backfills_while_a_higher_priority_gang_waits() -> None:
    snap = snapshot(
        [agent("a", 8), agent("b", 2)],
        [
            running("r", "g0", {"a": [0]}),
            Request("gang", "g1", 8, priority=10),
            Request("low", "g2", 2, priority=80),
        ],
    )
    decision = schedule(snap)
    assert set(decision.reservations) == {"gang"}
    assert decision.assignments == {"low": (("b", ("0", "1")),)}


def test_only_the_first_blocked_request_of_a_device_type_holds() -> None:
    snap = snapshot(
        [agent("a", 4), agent("c", 4, device_type="cpu")],
        [
            running("r", "g0", {"a": [0]}),
            running("rc", "g0", {"c": [0]}, device_type="cpu"),
            Request("gang1", "g1", 4, submitted_order=1),
            Request("gang2", "g2", 4, submitted_order=2),
            Request("cpu_gang", "g3", 4, submitted_order=3, device_type="cpu"),
        ],
    )
    assert set(schedule(snap).reservations) == {"gang1", "cpu_gang"}


def test_a_request_that_can_never_fit_holds_nothing() -> None:
    snap = snapshot(
        [agent("a", 4), agent("b", 4)],
        [
            Request("huge", "g1", 12, submitted_order=1),
            Request("odd", "g1", 6, submitted_order=2),
            Request("small", "g2", 2, submitted_order=3),
        ],
    )
    decision = schedule(snap)
    assert decision.reservations == {}
    assert set(decision.assignments) == {"small"}


def test_zero_slot_requests_do_not_wait_behind_slot_requests() -> None:
    snap = snapshot(
        [agent("a", 4, busy=[0])],
        [Request("gang", "g1", 4, priority=1), Request("cmd", "g2", 0, priority=99)],
    )
    decision = schedule(snap)
    assert decision.assignments == {"cmd": (("a", ()),)}


def test_auxiliary_containers_are_limited_per_agent() -> None:
    settings = PoolSettings(max_aux_containers_per_agent=1)
    snap = snapshot(
        [agent("a", 0), agent("b", 0)],
        [running("busy", "g0", {"a": []}), Request("z1", "g", 0), Request("z2", "g", 0)],
        settings=settings,
    )
    decision = schedule(snap)
    assert list(decision.assignments.values()) == [(("b", ()),)]


def test_group_limits_hold_back_only_their_own_group() -> None:
    snap = snapshot(
        [agent("a", 8)],
        [
            running("r", "g1", {"a": [0, 1]}),
            Request("over_slots", "g1", 3, submitted_order=1),
            Request("fits", "g1", 1, submitted_order=2),
            Request("too_many", "g2", 1, submitted_order=3),
            Request("other", "g3", 3, submitted_order=4),
        ],
        groups=[GroupLimits("g1", max_slots=3), GroupLimits("g2", max_concurrent=0)],
    )
    decision = schedule(snap)
    assert set(decision.assignments) == {"fits", "other"}
    assert decision.reservations == {}


def test_draining_and_disabled_agents_get_no_new_work() -> None:
    snap = snapshot(
        [agent("d", 4, draining=True), agent("x", 4, enabled=False), agent("ok", 2)],
        [running("old", "g0", {"d": [0]}), Request("r1", "g", 2), Request("r2", "g", 2)],
    )
    decision = schedule(snap)
    assert decision.assignments == {"r1": (("ok", ("0", "1")),)}
    assert decision.preemptions == ()


# -- preemption -----------------------------------------------------------------------------


def test_preemption_frees_only_what_the_request_needs() -> None:
    snap = snapshot(
        [agent("a", 4), agent("b", 4)],
        [
            running("keep", "g0", {"a": [0, 1, 2]}, priority=70, preemptible=False),
            running("useless", "g1", {"a": [3]}, priority=70, submitted_order=5),
            running("needed", "g2", {"b": [0, 1, 2, 3]}, priority=70, submitted_order=1),
            Request("urgent", "g3", 4, priority=10, submitted_order=9),
        ],
        settings=PREEMPT,
    )
    decision = schedule(snap)
    # Determined would preempt "useless" too: it is the latest, so considered first.
    assert decision.preemptions == ("needed",)
    assert decision.reservations == {"urgent": (("b", ("0", "1", "2", "3")),)}
    assert decision.assignments == {}


def test_preemption_takes_the_lowest_priority_and_latest_first() -> None:
    snap = snapshot(
        [agent("a", 2)],
        [
            running("p50_early", "g1", {"a": [0]}, priority=50, submitted_order=1),
            running("p60", "g2", {"a": [1]}, priority=60, submitted_order=0),
            Request("urgent", "g3", 1, priority=10),
        ],
        settings=PREEMPT,
    )
    assert schedule(snap).preemptions == ("p60",)


def test_no_preemption_when_disabled_or_not_preemptible_or_not_behind() -> None:
    base = [
        running("equal", "g1", {"a": [0]}, priority=10, submitted_order=5),
        running("fixed", "g2", {"a": [1]}, priority=70, preemptible=False),
        running("higher", "g3", {"a": [2]}, priority=5),
        Request("urgent", "g4", 2, priority=10, submitted_order=5),
    ]
    assert schedule(snapshot([agent("a", 3)], base)).preemptions == ()
    assert schedule(snapshot([agent("a", 3)], base, settings=PREEMPT)).preemptions == ()


def test_equal_priority_work_queued_later_is_preemptible_as_in_determined() -> None:
    snap = snapshot(
        [agent("a", 2)],
        [
            running("later", "g1", {"a": [0, 1]}, priority=42, submitted_order=7),
            Request("earlier", "g2", 2, priority=42, submitted_order=3),
        ],
        settings=PREEMPT,
    )
    assert schedule(snap).preemptions == ("later",)


def test_slots_already_being_freed_are_claimed_without_preempting_again() -> None:
    snap = snapshot(
        [agent("a", 4)],
        [
            running("going", "g1", {"a": [0, 1]}, priority=70, preempting=True),
            running("other", "g2", {"a": [2, 3]}, priority=70),
            Request("urgent", "g3", 2, priority=10),
            Request("low", "g4", 2, priority=80),
        ],
        settings=PREEMPT,
    )
    decision = schedule(snap)
    assert decision.preemptions == ()
    # "low" is the first request left blocked, so it holds what "other" will free one day.
    assert decision.reservations == {
        "urgent": (("a", ("0", "1")),),
        "low": (("a", ("2", "3")),),
    }
    assert decision.assignments == {}


def test_held_slots_count_against_the_group_limit() -> None:
    snap = snapshot(
        [agent("a", 4)],
        [
            running("victim", "g0", {"a": [0, 1, 2, 3]}, priority=70),
            Request("u1", "g1", 2, priority=10, submitted_order=1),
            Request("u2", "g1", 2, priority=10, submitted_order=2),
        ],
        settings=PREEMPT,
        groups=[GroupLimits("g1", max_slots=2)],
    )
    decision = schedule(snap)
    assert decision.preemptions == ("victim",)
    assert set(decision.reservations) == {"u1"}


# -- properties -----------------------------------------------------------------------------


@given(snapshots())
def test_decisions_keep_every_invariant(snap: Snapshot) -> None:
    check_decision(snap, schedule(snap))


@given(snapshots(limits=False))
def test_nothing_starts_while_a_request_ahead_of_it_would_fit(snap: Snapshot) -> None:
    """For any started request L and waiting request H ahead of it (same kind: slot or
    zero-slot), H does not fit in what is left free and not held for requests ahead of H."""
    decision = schedule(snap)
    started = [r for r in snap.requests if r.allocation_id in decision.assignments]
    waiting = [
        r
        for r in snap.requests
        if not r.running
        and r.allocation_id not in decision.assignments
        and r.allocation_id not in decision.reservations
    ]
    used = {pair for p in decision.assignments.values() for pair in placement_slots(p)}
    aux_used: Counter[str] = Counter(
        r.assignment[0][0] for r in snap.requests if r.running and r.slots_needed == 0
    )
    for p in (*decision.assignments.values(), *decision.reservations.values()):
        for agent_id, slots in p:
            if not slots:
                aux_used[agent_id] += 1
    by_id = {r.allocation_id: r for r in snap.requests}
    for high in waiting:
        if not any(
            queue_key(high) < queue_key(low) and (low.slots_needed == 0) == (high.slots_needed == 0)
            for low in started
        ):
            continue
        ahead_held = {
            pair
            for a, p in decision.reservations.items()
            if queue_key(by_id[a]) < queue_key(high)
            for pair in placement_slots(p)
        }
        assert not fits_in(high, snap, used | ahead_held, aux_used), high.allocation_id


@given(
    st.integers(1, 3),
    st.sampled_from([2, 4, 8]),
    st.integers(0, 4),
    st.booleans(),
)
def test_two_gangs_over_half_the_pool_never_deadlock(
    n_agents: int, size: int, busy: int, preemption: bool
) -> None:
    total = n_agents * size
    need = total // 2 + 1
    if n_agents > 1:
        need = total  # multi-agent gangs take whole agents: both want the whole pool
    agents = [agent(f"a{i}", size) for i in range(n_agents)]
    runner = running("r", "g0", {"a0": range(min(busy, size))}, priority=99) if busy else None
    requests = [
        Request("second", "g2", need, submitted_order=2),
        Request("first", "g1", need, submitted_order=1),
    ]
    snap = snapshot(
        agents,
        [*requests, *([runner] if runner else [])],
        settings=PoolSettings(preemption=preemption),
    )
    decision = schedule(snap)
    check_decision(snap, decision)
    assert "second" not in decision.assignments
    assert "first" in decision.assignments or "first" in decision.reservations
    if "first" in decision.reservations:
        assert "second" not in decision.reservations


@given(snapshots(preemption=True))
def test_preemption_picks_only_work_behind_a_request_that_it_makes_room_for(
    snap: Snapshot,
) -> None:
    decision = schedule(snap)
    by_id = {r.allocation_id: r for r in snap.requests}
    freed = {pair for r in snap.requests if r.preempting for pair in placement_slots(r.assignment)}
    for victim_id in decision.preemptions:
        freed |= placement_slots(by_id[victim_id].assignment)
    free = {(a.id, s.id) for a in snap.agents for s in a.slots if s.free}
    for victim_id in decision.preemptions:
        victim = by_id[victim_id]
        assert victim.preemptible
        assert not victim.preempting
        mine = placement_slots(victim.assignment)
        beneficiaries = [
            by_id[a]
            for a, p in decision.reservations.items()
            if ranks_ahead(by_id[a], victim)
            and (placement_slots(p) & mine or (victim.slots_needed == 0 and not placement_slots(p)))
            and placement_slots(p) <= free | freed
        ]
        assert beneficiaries, f"{victim_id} was preempted for nobody"
