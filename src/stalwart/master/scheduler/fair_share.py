"""The fair-share scheduler: each group (job) gets a share of the pool proportional to its weight.

Determined's algorithm (``fair_share.go``), per pool and, here, per device type:

1. **Zero-slot requests** start wherever an auxiliary container is open, in queue order; they
   take no share.
2. **Demand.** A group's demand is the slots of its running requests (those not already being
   preempted) plus those of its pending requests that could ever fit in the pool (within
   ``max_concurrent``), capped by ``max_slots``. Slots of running requests that are not
   preemptible are its floor.
3. **Offers** by weighted max-min fairness (progressive filling): all groups' offers rise in
   proportion to their weights until a group reaches its demand; the others keep rising until
   the capacity is offered. Offers are whole slots: the rounding remainder goes to the largest
   fractions, then the earliest group. Determined's approximation of this (rounds of
   ``max(1, capacity * weight / total)``) is replaced by the exact solution.
4. **Gang deadlock.** A group whose offer leaves room above what it runs, yet less than its
   smallest pending request, could never use that room. As in Determined, the latest such group
   (by its first request's ``submitted_order``) stops asking for more (it keeps what it runs, up
   to its share) and the offers are recomputed, until no group is stuck. So of two gangs that
   each need more than half the pool, the earlier one runs first.
5. **Assign.** Groups in order of arrival start pending requests (queue order) that fit within
   their offer less what they run, if they fit on free slots now. One that fits its offer but
   not the free slots (they are still held by groups above their share) gets a reservation: the
   placement nearest to free is held, so no other group starts there.
6. **Preempt.** A group running more than its offer is asked to release preemptible requests
   until it is within it: first those sitting on slots held for another group, then the most
   recently submitted. Releases take effect when the requests exit, so starts never count on
   them in the same round.

Known limit (Determined's too): a request larger than its group's share waits until the other
groups' demand leaves it room; fair share does not time-slice a pool between gangs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction

from stalwart.master.scheduler.fitting import Avail, fit, reserve
from stalwart.master.scheduler.pool import PoolRound
from stalwart.master.scheduler.snapshot import (
    Decision,
    Request,
    placement_slots,
    queue_key,
    queue_order,
)

__all__ = ["schedule_fair_share"]


@dataclass
class _Group:
    id: str
    arrival: tuple[int, str]
    weight: Fraction
    running: list[Request] = field(default_factory=list)
    pending: list[Request] = field(default_factory=list)
    active: int = 0
    floor: int = 0
    demand: int = 0


def schedule_fair_share(round_: PoolRound) -> Decision:
    """Decide one round of one pool under the fair-share scheduler (see the module docstring)."""
    settings = round_.settings
    for request in round_.pending:
        if request.slots_needed == 0 and round_.book.allows(request):
            placement = fit(
                request,
                round_.now,
                round_.model,
                settings.fitting_policy,
                settings.allow_heterogeneous_fits,
            )
            if placement is not None:
                round_.start(request, placement)
    device_types = sorted(
        {r.device_type for r in (*round_.running, *round_.pending) if r.slots_needed > 0}
    )
    for device_type in device_types:
        _share(round_, device_type)
    return round_.decision()


def _share(round_: PoolRound, device_type: str) -> None:
    settings = round_.settings
    model = round_.model
    capacity = model.capacity(device_type)
    groups: dict[str, _Group] = {}

    def group_of(request: Request) -> _Group:
        if request.group_id not in groups:
            groups[request.group_id] = _Group(
                id=request.group_id,
                arrival=(request.submitted_order, request.group_id),
                weight=Fraction(request.weight),
            )
        group = groups[request.group_id]
        group.arrival = min(group.arrival, (request.submitted_order, request.group_id))
        return group

    mine = queue_order(
        r
        for r in (*round_.running, *round_.pending)
        if r.slots_needed > 0 and r.device_type == device_type
    )
    full = model.full()
    for request in mine:
        if request.running:
            if request.preempting:
                continue
            # Slots that take no new work (draining agent, disabled slot) still hold this work.
            capacity += sum(
                1 for a, s in placement_slots(request.assignment) if not model.usable(a, s)
            )
            group = group_of(request)
            group.running.append(request)
            group.active += request.slots_needed
            if not request.preemptible:
                group.floor += request.slots_needed
        elif (
            fit(request, full, model, settings.fitting_policy, settings.allow_heterogeneous_fits)
            is not None
        ):
            group_of(request).pending.append(request)

    for group in groups.values():
        limits = round_.book.limits_of(group.id)
        if limits is not None and limits.max_concurrent is not None:
            spare = limits.max_concurrent - round_.book.count(group.id)
            group.pending = group.pending[: max(0, spare)]
        demand = group.active + sum(r.slots_needed for r in group.pending)
        if limits is not None and limits.max_slots is not None:
            demand = min(demand, limits.max_slots)
        group.demand = max(demand, group.floor)

    offers = _offers(list(groups.values()), capacity)
    order = sorted(groups.values(), key=lambda g: g.arrival)
    # Reservations prefer what is free, freeing, or about to be preempted (newest first).
    coming = round_.now.copy()
    for avail in round_.soon.values():
        coming.merge(avail)
    for group in order:
        for victim in _victims(group, offers[group.id], round_.held):
            coming.merge(round_.usable_part(victim.assignment))
    for group in order:
        room = offers[group.id] - group.active
        for request in group.pending:
            if request.slots_needed > room or not round_.book.allows(request):
                continue
            placement = fit(
                request,
                round_.now,
                model,
                settings.fitting_policy,
                settings.allow_heterogeneous_fits,
            )
            if placement is not None:
                round_.start(request, placement)
                room -= request.slots_needed
                continue
            held = reserve(
                request,
                full.minus(round_.held),
                coming.minus(round_.held),
                model,
                settings.allow_heterogeneous_fits,
            )
            if held is not None:
                round_.hold(request, held, counts=False)
                room -= request.slots_needed

    for group in order:
        for victim in _victims(group, offers[group.id], round_.held):
            round_.preempt(victim)


def _victims(group: _Group, offer: int, held: Avail) -> list[Request]:
    """Preemptible requests that bring the group down to its offer: those on slots held for
    other groups first, then the newest."""
    candidates = sorted((r for r in group.running if r.preemptible), key=queue_key, reverse=True)
    candidates.sort(key=lambda r: -_overlap(held, r))  # stable: newest first among equals
    out: list[Request] = []
    excess = group.active - offer
    for request in candidates:
        if excess <= 0:
            break
        out.append(request)
        excess -= request.slots_needed
    return out


def _overlap(held: Avail, request: Request) -> int:
    return sum(1 for a, s in placement_slots(request.assignment) if s in held.slots.get(a, ()))


def _offers(groups: list[_Group], capacity: int) -> dict[str, int]:
    """Each group's offer in whole slots (steps 3 and 4 of the module docstring)."""
    stopped: set[str] = set()
    while True:
        bounds = {g.id: (g.floor, _ceiling(g, g.id in stopped)) for g in groups}
        offers = _fill(groups, bounds, capacity)
        stuck = [
            g
            for g in groups
            if g.id not in stopped
            and g.pending
            and 0 < offers[g.id] - g.active < min(r.slots_needed for r in g.pending)
        ]
        if not stuck:
            return offers
        stopped.add(max(stuck, key=lambda g: g.arrival).id)


def _ceiling(group: _Group, stopped: bool) -> int:
    """What a group may be offered at most; a stopped group asks for no more than it runs."""
    if not stopped:
        return group.demand
    return max(group.floor, min(group.demand, group.active))


def _fill(
    groups: list[_Group], bounds: dict[str, tuple[int, int]], capacity: int
) -> dict[str, int]:
    """Weighted max-min fair split of ``capacity`` between ``bounds`` (floor, demand)."""
    low = sum(lo for lo, _ in bounds.values())
    high = sum(hi for _, hi in bounds.values())
    if low >= capacity:
        return {g: lo for g, (lo, _) in bounds.items()}
    if high <= capacity:
        return {g: hi for g, (_, hi) in bounds.items()}
    by_arrival = sorted(groups, key=lambda g: g.arrival)
    weighted = [g for g in by_arrival if g.weight > 0]
    unweighted = [g for g in by_arrival if g.weight <= 0]
    top = sum(bounds[g.id][1] for g in weighted) + sum(bounds[g.id][0] for g in unweighted)
    if top <= capacity:
        # Every weighted group is satisfied; weightless groups share what is left, in order.
        out = {g.id: bounds[g.id][1] for g in weighted}
        left = capacity - top
        for g in unweighted:
            lo, hi = bounds[g.id]
            out[g.id] = lo + min(hi - lo, left)
            left -= out[g.id] - lo
        return out

    def level(lam: Fraction) -> Fraction:
        total = Fraction(sum(bounds[g.id][0] for g in unweighted))
        for g in weighted:
            lo, hi = bounds[g.id]
            total += _clamp(lam * g.weight, lo, hi)
        return total

    points = sorted(
        {Fraction(0)}
        | {Fraction(bounds[g.id][0]) / g.weight for g in weighted}
        | {Fraction(bounds[g.id][1]) / g.weight for g in weighted}
    )
    lam = points[-1]
    for a, b in itertools.pairwise(points):
        at_a, at_b = level(a), level(b)
        if at_b >= capacity:
            lam = a + (b - a) * (capacity - at_a) / (at_b - at_a)
            break
    shares = {g.id: Fraction(bounds[g.id][0]) for g in unweighted}
    for g in weighted:
        lo, hi = bounds[g.id]
        shares[g.id] = _clamp(lam * g.weight, lo, hi)
    out = {g: int(x) for g, x in shares.items()}
    left = capacity - sum(out.values())
    for g in sorted(by_arrival, key=lambda g: -(shares[g.id] - out[g.id]))[:left]:
        out[g.id] += 1
    return out


def _clamp(x: Fraction, lo: int, hi: int) -> Fraction:
    return Fraction(lo) if x < lo else Fraction(hi) if x > hi else x
