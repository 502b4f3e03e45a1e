"""Queued successors: which waiting requests wait behind which running ones (pure).

A random or grid search creates its next trials ahead of the exits that make room for them
(``cluster.queue_successors``). Such a trial cannot start while its experiment runs
``max_concurrent_trials`` trials, but it can wait *behind* one of them: placed on that
trial's slots, which stay the running trial's until it exits, for the agent to start it the
moment the running one exits (``TaskSpec.after``), without the master's round trip in between.

:func:`pair_successors` chooses, after a round's :class:`~stalwart.master.scheduler.Decision`,
for each waiting request of a group that allows it (``GroupLimits.successors``), in queue
order, the first running request of the same group that

- runs on one agent (one container), holds slots (``slots_needed`` > 0, the same number) and
  is not being preempted,
- has no successor yet (``Request.has_successor``), and whose agent still takes new work
  (enabled, not draining) and is not one the waiting request must avoid.

A group queues nothing in a pool where a waiting request of another group wants slots (one
its own group's limits do not hold back: below ``max_concurrent`` and ``max_slots``, counting
what runs and what this round placed), nor where the round preempts: the slots that free up
there are the scheduler's to give, by its policy. (Another group that waits only because it
runs its own ``max_concurrent`` wants nothing; its waiting trials may queue too.) Nothing here
is read or written besides the arguments; the caller claims the pairs
(``Claimer.claim_behind``), re-checking the database.
"""

from __future__ import annotations

from stalwart.master.scheduler.limits import GroupBook
from stalwart.master.scheduler.snapshot import Decision, Request, Snapshot, queue_order

__all__ = ["pair_successors"]


def pair_successors(snapshot: Snapshot, decision: Decision) -> dict[str, str]:
    """Waiting allocation id -> the running allocation id it queues behind (see the module
    docstring); empty when no group queues successors."""
    groups = {g.group_id for g in snapshot.groups if g.successors}
    if not groups:
        return {}
    requests = queue_order(snapshot.requests)
    waiting = [r for r in requests if not r.running and r.allocation_id not in decision.assignments]
    wanting: dict[str, set[str]] = {}  # pool -> the groups with a request that wants slots
    for request in _wanting_slots(snapshot, decision, waiting):
        wanting.setdefault(request.pool, set()).add(request.group_id)
    by_id = {r.allocation_id: r for r in requests}
    preempting = {by_id[a].pool for a in decision.preemptions if a in by_id}

    def closed(pool: str, group: str) -> bool:
        return pool in preempting or bool(wanting.get(pool, set()) - {group})

    takes_work = {a.id for a in snapshot.agents if a.schedulable}
    free: dict[str, list[Request]] = {}
    for r in requests:
        if (
            r.running
            and r.group_id in groups
            and not closed(r.pool, r.group_id)
            and r.slots_needed > 0
            and len(r.assignment) == 1
            and r.assignment[0][0] in takes_work
            and not r.preempting
            and not r.has_successor
        ):
            free.setdefault(r.group_id, []).append(r)
    pairs: dict[str, str] = {}
    for request in waiting:
        if request.group_id not in groups or closed(request.pool, request.group_id):
            continue
        candidates = free.get(request.group_id, [])
        for i, running in enumerate(candidates):
            if (
                running.slots_needed == request.slots_needed
                and running.pool == request.pool
                and running.assignment[0][0] not in request.blocked_agents
            ):
                pairs[request.allocation_id] = running.allocation_id
                del candidates[i]
                break
    return pairs


def _wanting_slots(snapshot: Snapshot, decision: Decision, waiting: list[Request]) -> list[Request]:
    """The waiting requests that their own group's limits do not hold back (counting what
    runs, preempting or not, and what ``decision`` placed: :class:`GroupBook`)."""
    by_id = {r.allocation_id: r for r in snapshot.requests}
    held = [r for r in snapshot.requests if r.running]
    held += [by_id[a] for a in decision.assignments if a in by_id]
    book = GroupBook({g.group_id: g for g in snapshot.groups}, held)
    return [r for r in waiting if book.allows(r)]
