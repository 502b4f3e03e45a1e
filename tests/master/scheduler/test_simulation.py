"""Many rounds over a simulated queue: every request that can run eventually runs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stalwart.master.scheduler import PoolSettings, Request
from stalwart.master.scheduler.fitting import PoolModel, fit
from tests.master.scheduler.helpers import Job, Simulation, agent


def can_ever_run(request: Request, sim: Simulation) -> bool:
    model = PoolModel(sim.agents, sim.settings.max_aux_containers_per_agent)
    return (
        fit(
            request,
            model.full(),
            model,
            sim.settings.fitting_policy,
            sim.settings.allow_heterogeneous_fits,
        )
        is not None
    )


@st.composite
def simulations(draw: st.DrawFn, scheduler: str) -> Simulation:
    sizes = draw(st.lists(st.sampled_from([2, 4, 4, 8]), min_size=1, max_size=3))
    agents = [agent(f"a{i}", s) for i, s in enumerate(sizes)]
    pool = PoolSettings(
        scheduler="fair_share" if scheduler == "fair_share" else "priority",
        preemption=draw(st.booleans()),
        fitting_policy=draw(st.sampled_from(["best", "worst"])),
        allow_heterogeneous_fits=draw(st.booleans()),
        max_aux_containers_per_agent=draw(st.integers(1, 2)),
    )
    sim = Simulation(agents, [], settings=pool, preempt_delay=draw(st.integers(1, 2)))
    for i in range(draw(st.integers(1, 14))):
        request = Request(
            f"r{i}",
            f"g{draw(st.integers(0, 3))}",
            draw(st.sampled_from([0, 1, 1, 2, 3, 4, 8, 12, 16])),
            priority=draw(st.sampled_from([10, 42, 42, 70])),
            weight=draw(st.sampled_from([1.0, 2.0])),
            submitted_order=i,
            preemptible=draw(st.integers(0, 3)) > 0,
            is_single_node=draw(st.integers(0, 3)) == 0,
        )
        if can_ever_run(request, sim):
            sim.jobs.append(Job(request, rounds=draw(st.integers(1, 4))))
    return sim


def bound(sim: Simulation) -> int:
    return 3 * sum(j.rounds + sim.preempt_delay for j in sim.jobs) + 10


@settings(max_examples=60, deadline=None)
@given(simulations("priority"))
def test_priority_scheduling_eventually_runs_everything(sim: Simulation) -> None:
    expected = {j.request.allocation_id for j in sim.jobs}
    sim.run(bound(sim))
    assert set(sim.done) == expected


@settings(max_examples=60, deadline=None)
@given(simulations("fair_share"))
def test_fair_share_eventually_runs_everything(sim: Simulation) -> None:
    expected = {j.request.allocation_id for j in sim.jobs}
    sim.run(bound(sim))
    assert set(sim.done) == expected


def test_a_big_gang_is_not_starved_by_a_stream_of_small_requests() -> None:
    """Determined lets equal-priority requests that fit overtake one that does not, forever;
    holding for the head of the queue lets the gang start once the work on its agent ends."""
    sim = Simulation([agent("a", 4), agent("b", 4)], [])
    small = 0

    def arrive(n: int) -> None:
        nonlocal small
        for _ in range(n):
            small += 1
            sim.jobs.append(Job(Request(f"s{small}", "smalls", 1, submitted_order=10 * small), 3))

    arrive(8)
    sim.step()  # the pool is full of small requests
    sim.jobs.append(Job(Request("gang", "big", 4, submitted_order=10 * small + 5), rounds=2))
    for _ in range(12):
        arrive(2)
        sim.step()
    assert "gang" in sim.started_round
    assert sim.started_round["gang"] <= 5


def test_equal_gangs_run_one_after_the_other_in_order() -> None:
    sim = Simulation(
        [agent("a", 8)],
        [
            Job(Request("second", "g2", 6, submitted_order=2), rounds=2),
            Job(Request("first", "g1", 6, submitted_order=1), rounds=2),
        ],
    )
    sim.run(10)
    assert sim.done == ["first", "second"]
