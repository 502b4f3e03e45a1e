"""The priority scheduler (Determined's default for agent pools).

Pending requests are taken in queue order, ``(priority, submitted_order, allocation_id)``;
zero-slot requests and slot requests are scheduled independently of each other (a zero-slot
request only needs an auxiliary container, which no slot request competes for). For each
pending request, in order:

1. **Group limits.** A request that would take its group past ``max_slots`` or
   ``max_concurrent`` waits for its own group and affects nobody else.
2. **Start** it if it fits in what is free now (see :mod:`.fitting`).
3. **Preempt** (pools with ``preemption: true``): if what preempted work ranked behind it will
   give back, plus what is free, already fits it, that is held for it. Otherwise running
   requests that are preemptible and ranked behind it (a larger priority number, or the same
   priority and a later ``submitted_order``, as Determined's job queue does) are considered,
   the lowest-ranked and latest first, until the request would fit; then every chosen victim that
   turns out not to be needed is spared again, so only as much is preempted as the request needs.
   The request's placement is held for it; it starts in a later round, once the victims exit.
4. **Hold for the first blocked request.** The first slot request of each device type that can
   neither start nor preempt, but could run in this pool once busy slots free up, gets a
   *reservation*: the placement that is nearest to free (most slots free now or freeing soon)
   among those it could ever use. Nothing later in the queue may take a held slot, so the held
   placement only gets freer and the request starts after the work now on it ends. Everything
   else keeps *backfilling*: a later request that fits elsewhere starts at once.

Why this rule. Determined lets a request of the same priority that fits take free slots ahead
of a large one that does not (so a large gang can wait forever while small requests keep
arriving), and starts nothing of a lower priority while a higher one waits (idling the pool),
unless preemption is on and the lower one is preemptible. Holding a placement for the head of
the queue (EASY backfilling, without run-time estimates) removes the starvation and keeps the
pool busy. Guarantees, for a fixed set of requests: nothing starts while a request ahead of it
would fit in the capacity left free and not held for requests ahead of that one; each request
that can ever fit becomes the head and starts after work that is running now ends; a request
that can never fit in the pool (larger than any fit its agents allow) holds nothing.
"""

from __future__ import annotations

from stalwart.master.scheduler.fitting import Avail, fit, reserve
from stalwart.master.scheduler.pool import PoolRound, ranks_ahead
from stalwart.master.scheduler.snapshot import Decision, Placement, Request

__all__ = ["schedule_priority"]


def schedule_priority(round_: PoolRound) -> Decision:
    """Decide one round of one pool under the priority scheduler (see the module docstring)."""
    settings = round_.settings
    for zero_slot in (False, True):
        head_held: set[str] = set()
        for request in round_.pending:
            if (request.slots_needed == 0) != zero_slot or not round_.book.allows(request):
                continue
            placement = fit(
                request,
                round_.now,
                round_.model,
                settings.fitting_policy,
                settings.allow_heterogeneous_fits,
            )
            if placement is not None:
                round_.start(request, placement)
                continue
            if settings.preemption and _place_by_preemption(round_, request):
                continue
            if zero_slot or request.device_type in head_held:
                # Zero-slot requests all need the same single container: the earliest always
                # gets the next one that opens, so none needs holding.
                continue
            held = reserve(
                request,
                round_.model.full().minus(round_.held),
                _everything_coming(round_),
                round_.model,
                settings.allow_heterogeneous_fits,
            )
            if held is not None:
                round_.hold(request, held, counts=False)
                head_held.add(request.device_type)
    return round_.decision()


def _everything_coming(round_: PoolRound) -> Avail:
    out = round_.now.copy()
    for avail in round_.soon.values():
        out.merge(avail)
    return out


def _place_by_preemption(round_: PoolRound, request: Request) -> bool:
    """Hold a placement for ``request`` out of resources freeing soon, preempting what is needed
    first; ``False`` (and nothing preempted) when even all candidates would not make room."""
    settings = round_.settings
    model = round_.model

    def fits(view: Avail) -> Placement | None:
        return fit(request, view, model, settings.fitting_policy, settings.allow_heterogeneous_fits)

    base = round_.now.copy()
    base.merge(round_.soon_for(request))
    placement = fits(base)
    if placement is not None:
        round_.hold(request, placement, counts=True)
        return True

    # Candidates, lowest-ranked and latest first, that would give back something this request
    # could use.
    already = set(round_.preemptions)
    parts: dict[str, Avail] = {}
    candidates: list[Request] = []
    for r in reversed(round_.running):
        if (
            not r.preemptible
            or r.preempting
            or r.allocation_id in already
            or (r.slots_needed == 0) != (request.slots_needed == 0)
            or not ranks_ahead(request, r)
        ):
            continue
        part = round_.usable_part(r.assignment).minus(round_.held)
        if request.slots_needed == 0:
            useful = any(part.aux.values())
        else:
            useful = any(
                model.type_of(agent, slot) == request.device_type
                for agent, slots in part.slots.items()
                for slot in slots
            )
        if useful:
            parts[r.allocation_id] = part
            candidates.append(r)

    def view_of(victims: list[Request]) -> Avail:
        view = base.copy()
        for victim in victims:
            view.merge(parts[victim.allocation_id])
        return view

    if fits(view_of(candidates)) is None:
        return False
    # The shortest prefix of the candidates that makes room (fitting is monotone)...
    lo, hi = 1, len(candidates)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(view_of(candidates[:mid])) is not None:
            hi = mid
        else:
            lo = mid + 1
    chosen = candidates[:lo]
    placement = fits(view_of(chosen))
    assert placement is not None
    # ...less every victim the placement does not touch, less every other one not needed.
    chosen = [v for v in chosen if _touches(parts[v.allocation_id], placement)]
    for candidate in reversed(list(chosen)):
        rest = [c for c in chosen if c is not candidate]
        if fits(view_of(rest)) is not None:
            chosen = rest
    placement = fits(view_of(chosen))
    assert placement is not None
    for victim in chosen:
        round_.preempt(victim)
    round_.hold(request, placement, counts=True)
    return True


def _touches(part: Avail, placement: Placement) -> bool:
    for agent, slots in placement:
        if slots and part.slots.get(agent, set()) & set(slots):
            return True
        if not slots and part.aux.get(agent, 0) > 0:
            return True
    return False
