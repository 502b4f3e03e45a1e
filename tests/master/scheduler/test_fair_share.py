"""The fair-share scheduler: offers by weight, preemption of groups above their share."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stalwart.master.scheduler import GroupLimits, PoolSettings, Request, Snapshot, schedule
from tests.master.scheduler.helpers import (
    Job,
    Simulation,
    agent,
    check_decision,
    running,
    snapshot,
    snapshots,
)

FAIR = PoolSettings(scheduler="fair_share")


def fill(group: str, agent_id: str, slots: range, **kw: object) -> list[Request]:
    return [running(f"{group}{i}", group, {agent_id: [i]}, **kw) for i in slots]


def queue(group: str, n: int, order: int, **kw: object) -> list[Request]:
    return [
        Request(f"{group}-new{i}", group, 1, submitted_order=order, **kw)  # type: ignore[arg-type]
        for i in range(n)
    ]


def test_a_group_above_its_share_is_preempted_newest_first() -> None:
    snap = snapshot(
        [agent("a", 8)],
        [
            *[running(f"A{i}", "A", {"a": [i]}, submitted_order=i) for i in range(8)],
            *queue("B", 8, order=100),
        ],
        settings=FAIR,
    )
    decision = schedule(snap)
    assert decision.preemptions == ("A7", "A6", "A5", "A4")
    assert decision.assignments == {}
    # B's requests hold exactly the slots being freed.
    held = {slot for p in decision.reservations.values() for _, slots in p for slot in slots}
    assert held == {"4", "5", "6", "7"}


def test_offers_follow_weights() -> None:
    snap = snapshot(
        [agent("a", 8)],
        [*queue("A", 8, order=1, weight=1.0), *queue("B", 8, order=2, weight=3.0)],
        settings=FAIR,
    )
    decision = schedule(snap)
    groups = [a.split("-")[0] for a in decision.assignments]
    assert (groups.count("A"), groups.count("B")) == (2, 6)


def test_work_that_is_not_preemptible_is_a_floor() -> None:
    snap = snapshot(
        [agent("a", 4)],
        [*fill("A", "a", range(4), preemptible=False), *queue("B", 4, order=5)],
        settings=FAIR,
    )
    decision = schedule(snap)
    assert decision.preemptions == ()
    assert decision.assignments == {}


def test_max_slots_caps_a_groups_share() -> None:
    snap = snapshot(
        [agent("a", 8)],
        [*queue("A", 8, order=1), *queue("B", 8, order=2)],
        settings=FAIR,
        groups=[GroupLimits("A", max_slots=2)],
    )
    groups = [a.split("-")[0] for a in schedule(snap).assignments]
    assert (groups.count("A"), groups.count("B")) == (2, 6)


def test_requests_already_leaving_are_not_preempted_again_nor_counted() -> None:
    snap = snapshot(
        [agent("a", 4)],
        [
            *[
                running(f"A{i}", "A", {"a": [i]}, preempting=i >= 2, submitted_order=i)
                for i in range(4)
            ],
            *queue("B", 4, order=9),
        ],
        settings=FAIR,
    )
    assert schedule(snap).preemptions == ()


def test_of_two_gangs_over_half_the_pool_the_earlier_group_runs() -> None:
    snap = snapshot(
        [agent("a", 8)],
        [Request("late", "L", 5, submitted_order=2), Request("early", "E", 5, submitted_order=1)],
        settings=FAIR,
    )
    assert set(schedule(snap).assignments) == {"early"}


def test_zero_slot_requests_take_no_share() -> None:
    snap = snapshot(
        [agent("a", 2)],
        [*fill("A", "a", range(2)), Request("cmd", "B", 0, submitted_order=5)],
        settings=FAIR,
    )
    decision = schedule(snap)
    assert decision.assignments == {"cmd": (("a", ()),)}
    assert decision.preemptions == ()


def test_a_weightless_group_gets_only_what_is_left() -> None:
    snap = snapshot(
        [agent("a", 4)],
        [*queue("A", 3, order=1), *queue("Z", 4, order=0, weight=0.0)],
        settings=FAIR,
    )
    groups = sorted(a.split("-")[0] for a in schedule(snap).assignments)
    assert groups == ["A", "A", "A", "Z"]


@given(snapshots(scheduler="fair_share"))
def test_fair_share_decisions_keep_every_invariant(snap: Snapshot) -> None:
    check_decision(snap, schedule(snap))


@settings(max_examples=40)
@given(
    st.lists(st.integers(1, 3), min_size=2, max_size=4),
    st.integers(1, 3),
    st.booleans(),
)
def test_running_slots_converge_to_the_weights(
    weights: list[int], n_agents: int, first_takes_all: bool
) -> None:
    agents = [agent(f"a{i}", 4) for i in range(n_agents)]
    capacity = 4 * n_agents
    jobs = [
        Job(Request(f"g{g}-{i}", f"g{g}", 1, weight=float(w), submitted_order=g), rounds=10**6)
        for g, w in enumerate(weights)
        for i in range(capacity)
    ]
    sim = Simulation(agents, jobs, settings=FAIR)
    if first_takes_all:  # one group got there first and fills the pool
        sim.jobs = [j for j in jobs if j.request.group_id == "g0"]
        sim.step()
        sim.jobs = jobs
    for _ in range(6):
        sim.step()
    shares = sim.running_slots()
    total = sum(weights)
    assert sum(shares.values()) == capacity
    for g, w in enumerate(weights):
        assert abs(shares[f"g{g}"] - capacity * w / total) < 1, (shares, weights)
    assert sim.step().preemptions == ()
