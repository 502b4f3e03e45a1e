"""Builders, a decision checker, hypothesis strategies and a queue simulator for scheduler tests."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hypothesis import strategies as st

from stalwart.master.scheduler import (
    AgentView,
    Decision,
    DeviceType,
    GroupLimits,
    Placement,
    PoolSettings,
    Request,
    SlotView,
    Snapshot,
    placement_slots,
    queue_key,
    schedule,
)
from stalwart.master.scheduler.fitting import Avail, PoolModel, fit

POOL = "default"


def agent(
    agent_id: str,
    slots: int,
    *,
    busy: Iterable[int] = (),
    device_type: DeviceType = "cuda",
    pool: str = POOL,
    enabled: bool = True,
    draining: bool = False,
    disabled_slots: Iterable[int] = (),
) -> AgentView:
    """An agent with slots ``"0"``, ``"1"``...; ``busy`` ones are not free."""
    busy_set, off = set(busy), set(disabled_slots)
    return AgentView(
        id=agent_id,
        pool=pool,
        slots=tuple(
            SlotView(
                id=str(i), device_type=device_type, free=i not in busy_set, enabled=i not in off
            )
            for i in range(slots)
        ),
        enabled=enabled,
        draining=draining,
    )


def running(
    allocation_id: str, group_id: str, where: Mapping[str, Iterable[int]], **kw: object
) -> Request:
    """A running request holding the given slots (``{agent_id: [slot numbers]}``)."""
    placement = tuple((a, tuple(str(s) for s in slots)) for a, slots in where.items())
    n = sum(len(s) for _, s in placement)
    return Request(
        allocation_id,
        group_id,
        n,
        running=True,
        assignment=placement,
        **kw,  # type: ignore[arg-type]
    )


def snapshot(
    agents: Iterable[AgentView],
    requests: Iterable[Request],
    *,
    settings: PoolSettings | None = None,
    groups: Iterable[GroupLimits] = (),
) -> Snapshot:
    """A one-pool snapshot whose slot ``free`` flags agree with the running requests."""
    reqs = tuple(requests)
    taken = {pair for r in reqs if r.running for pair in placement_slots(r.assignment)}
    fixed = tuple(
        dataclasses.replace(
            a,
            slots=tuple(
                dataclasses.replace(s, free=s.free and (a.id, s.id) not in taken) for s in a.slots
            ),
        )
        for a in agents
    )
    return Snapshot(
        agents=fixed,
        requests=reqs,
        groups=tuple(groups),
        pools={POOL: settings or PoolSettings()},
    )


# -- checking a decision --------------------------------------------------------------------


def check_decision(snap: Snapshot, decision: Decision) -> None:
    """Assert the invariants every decision must keep, whatever the policy."""
    by_id = {r.allocation_id: r for r in snap.requests}
    agents = {a.id: a for a in snap.agents}
    taken = {pair for r in snap.requests if r.running for pair in placement_slots(r.assignment)}
    used: set[tuple[str, str]] = set()
    aux = Counter(r.assignment[0][0] for r in snap.requests if r.running and r.slots_needed == 0)
    for allocation_id, placement in decision.assignments.items():
        request = by_id[allocation_id]
        assert not request.running, f"{allocation_id} already runs"
        _check_placement(request, placement, agents)
        for agent_id, slots in placement:
            view = agents[agent_id]
            free = {s.id for s in view.slots if s.free and s.enabled}
            for slot in slots:
                assert slot in free, f"{allocation_id}: {agent_id}/{slot} is not free"
                assert (agent_id, slot) not in taken, f"{agent_id}/{slot} is held by a runner"
                assert (agent_id, slot) not in used, f"{agent_id}/{slot} given twice"
                used.add((agent_id, slot))
            if not slots:
                aux[agent_id] += 1
        if len(placement) > 1:
            for agent_id, slots in placement:
                usable = {
                    s.id
                    for s in agents[agent_id].slots
                    if s.enabled and s.device_type == request.device_type
                }
                assert set(slots) == usable, f"{allocation_id}: partial agent in a multi-node fit"
    for agent_id, n in aux.items():
        limit = snap.settings_for(agents[agent_id].pool).max_aux_containers_per_agent
        new = sum(1 for p in decision.assignments.values() for a, s in p if a == agent_id and not s)
        assert n <= limit or new == 0, f"{agent_id}: too many auxiliary containers"
    assert len(set(decision.preemptions)) == len(decision.preemptions)
    for allocation_id in decision.preemptions:
        victim = by_id[allocation_id]
        assert victim.running
        assert victim.preemptible
        assert not victim.preempting
        settings = snap.settings_for(victim.pool)
        assert settings.scheduler == "fair_share" or settings.preemption
    for allocation_id, placement in decision.reservations.items():
        holder = by_id[allocation_id]
        assert allocation_id not in decision.assignments
        assert not holder.running
        if snap.settings_for(holder.pool).scheduler != "priority":
            continue
        for other_id, other in decision.assignments.items():
            if placement_slots(placement) & placement_slots(other):
                assert queue_key(by_id[other_id]) < queue_key(holder), "held slot given away"
    _check_limits(snap, decision)


def _check_placement(request: Request, placement: Placement, agents: dict[str, AgentView]) -> None:
    assert placement, f"{request.allocation_id}: empty placement"
    if request.slots_needed == 0:
        assert len(placement) == 1
        assert placement[0][1] == ()
    else:
        assert len(placement_slots(placement)) == request.slots_needed, "not all-or-nothing"
    if request.is_single_node:
        assert len(placement) == 1
    for agent_id, slots in placement:
        view = agents[agent_id]
        assert view.pool == request.pool, "wrong pool"
        assert view.schedulable, f"{agent_id} is disabled or draining"
        types = {s.id: s.device_type for s in view.slots}
        for slot in slots:
            assert types[slot] == request.device_type, "wrong device type"


def _check_limits(snap: Snapshot, decision: Decision) -> None:
    limits = {g.group_id: g for g in snap.groups}
    slots: Counter[str] = Counter()
    count: Counter[str] = Counter()
    new: Counter[str] = Counter()
    for r in snap.requests:
        if r.running:
            slots[r.group_id] += r.slots_needed
            count[r.group_id] += 1
        elif r.allocation_id in decision.assignments:
            slots[r.group_id] += r.slots_needed
            count[r.group_id] += 1
            new[r.group_id] += 1
    for group_id, limit in limits.items():
        if not new[group_id]:
            continue
        if limit.max_slots is not None:
            assert slots[group_id] <= limit.max_slots, f"{group_id} past max_slots"
        if limit.max_concurrent is not None:
            assert count[group_id] <= limit.max_concurrent, f"{group_id} past max_concurrent"


def fits_in(
    request: Request, snap: Snapshot, exclude: set[tuple[str, str]], aux_used: Counter[str]
) -> bool:
    """Whether ``request`` fits in the snapshot's free slots minus ``exclude``."""
    settings = snap.settings_for(request.pool)
    agents = [a for a in snap.agents if a.pool == request.pool]
    model = PoolModel(agents, settings.max_aux_containers_per_agent)
    view = Avail()
    for a in agents:
        if a.id in model.layouts:
            view.slots[a.id] = {
                s.id for s in a.slots if s.free and s.enabled and (a.id, s.id) not in exclude
            }
            view.aux[a.id] = max(0, settings.max_aux_containers_per_agent - aux_used[a.id])
    return (
        fit(request, view, model, settings.fitting_policy, settings.allow_heterogeneous_fits)
        is not None
    )


# -- hypothesis strategies ------------------------------------------------------------------


@st.composite
def snapshots(
    draw: st.DrawFn,
    *,
    scheduler: str = "priority",
    preemption: bool | None = None,
    limits: bool = True,
) -> Snapshot:
    """Small consistent one-pool clusters with running and pending requests."""
    n_agents = draw(st.integers(1, 4))
    agents: list[AgentView] = []
    for i in range(n_agents):
        size = draw(st.sampled_from([1, 2, 4, 4, 8]))
        agents.append(
            agent(
                f"a{i}",
                size,
                device_type=draw(st.sampled_from(["cuda", "cuda", "cuda", "cpu"])),
                enabled=draw(st.booleans()) or draw(st.booleans()),
                draining=draw(st.integers(0, 5)) == 0,
                disabled_slots=draw(st.sets(st.integers(0, size - 1), max_size=1))
                if draw(st.integers(0, 4)) == 0
                else (),
            )
        )
    groups = [f"g{i}" for i in range(draw(st.integers(1, 4)))]
    requests: list[Request] = []
    free = {(a.id, s.id) for a in agents for s in a.slots}
    order = 0
    for i in range(draw(st.integers(0, 6))):
        a = draw(st.sampled_from(agents))
        slots = sorted(s.id for s in a.slots if (a.id, s.id) in free)
        n = draw(st.integers(0, min(len(slots), 4)))
        chosen = slots[:n]
        free -= {(a.id, s) for s in chosen}
        order += draw(st.integers(0, 2))
        requests.append(
            Request(
                f"run{i}",
                draw(st.sampled_from(groups)),
                n,
                priority=draw(st.sampled_from([10, 42, 42, 70])),
                submitted_order=order,
                preemptible=draw(st.integers(0, 3)) > 0,
                device_type=a.slots[0].device_type,
                running=True,
                assignment=((a.id, tuple(chosen)),),
                preempting=draw(st.integers(0, 5)) == 0,
            )
        )
    for i in range(draw(st.integers(0, 8))):
        order += draw(st.integers(0, 2))
        requests.append(
            Request(
                f"req{i}",
                draw(st.sampled_from(groups)),
                draw(st.sampled_from([0, 1, 1, 2, 3, 4, 8, 12])),
                priority=draw(st.sampled_from([10, 42, 42, 70])),
                weight=draw(st.sampled_from([1.0, 1.0, 2.0, 0.5])),
                submitted_order=order,
                preemptible=draw(st.integers(0, 3)) > 0,
                is_single_node=draw(st.integers(0, 3)) == 0,
                device_type=draw(st.sampled_from(["cuda", "cuda", "cpu"])),
            )
        )
    group_limits: list[GroupLimits] = []
    if limits:
        for g in groups:
            if draw(st.integers(0, 2)) == 0:
                group_limits.append(
                    GroupLimits(
                        g,
                        max_slots=draw(st.none() | st.integers(0, 8)),
                        max_concurrent=draw(st.none() | st.integers(0, 3)),
                    )
                )
    settings = PoolSettings(
        scheduler="fair_share" if scheduler == "fair_share" else "priority",
        preemption=draw(st.booleans()) if preemption is None else preemption,
        fitting_policy=draw(st.sampled_from(["best", "worst"])),
        allow_heterogeneous_fits=draw(st.booleans()),
        max_aux_containers_per_agent=draw(st.integers(0, 3)),
    )
    return snapshot(agents, requests, settings=settings, groups=group_limits)


# -- simulating a queue over many rounds ----------------------------------------------------


@dataclass
class Job:
    """A request in the simulation and how many rounds it runs."""

    request: Request
    rounds: int
    ran: int = 0
    exit_in: int | None = None


@dataclass
class Simulation:
    """Applies decisions round after round: started requests run ``rounds`` rounds then finish;
    preempted ones exit after ``preempt_delay`` rounds and queue again."""

    agents: list[AgentView]
    jobs: list[Job]
    settings: PoolSettings = field(default_factory=PoolSettings)
    groups: list[GroupLimits] = field(default_factory=list)
    preempt_delay: int = 1
    done: list[str] = field(default_factory=list)
    started_round: dict[str, int] = field(default_factory=dict)
    round: int = 0

    def snapshot(self) -> Snapshot:
        return snapshot(
            self.agents, [j.request for j in self.jobs], settings=self.settings, groups=self.groups
        )

    def step(self) -> Decision:
        snap = self.snapshot()
        decision = schedule(snap)
        check_decision(snap, decision)
        self.round += 1
        by_id = {j.request.allocation_id: j for j in self.jobs}
        for job in list(self.jobs):
            r = job.request
            if not r.running:
                continue
            if r.preempting:
                assert job.exit_in is not None
                job.exit_in -= 1
                if job.exit_in <= 0:
                    job.request = dataclasses.replace(
                        r, running=False, assignment=(), preempting=False
                    )
                    job.exit_in = None
                continue
            job.ran += 1
            if job.ran >= job.rounds:
                self.jobs.remove(job)
                self.done.append(r.allocation_id)
        for allocation_id in decision.preemptions:
            job = by_id[allocation_id]
            if job in self.jobs and job.request.running:
                job.request = dataclasses.replace(job.request, preempting=True)
                job.exit_in = self.preempt_delay
        for allocation_id, placement in decision.assignments.items():
            job = by_id[allocation_id]
            job.request = dataclasses.replace(job.request, running=True, assignment=placement)
            self.started_round.setdefault(allocation_id, self.round)
        return decision

    def run(self, max_rounds: int) -> None:
        while self.jobs and self.round < max_rounds:
            self.step()

    def running_slots(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for j in self.jobs:
            if j.request.running and not j.request.preempting:
                out[j.request.group_id] += j.request.slots_needed
        return out


def sorted_pending(snap: Snapshot) -> list[Request]:
    return sorted((r for r in snap.requests if not r.running), key=queue_key)
