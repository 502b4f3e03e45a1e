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

A pool where anything else waits (a request of another group, or of a group that does not
queue successors), or where the round preempts, gets no pairs: the slots that free up there
are the scheduler's to give, by its policy. Nothing here is read or written besides the
arguments; the caller claims the pairs (``Claimer.claim_behind``), re-checking the database.
"""

from __future__ import annotations

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
    by_id = {r.allocation_id: r for r in requests}
    closed = {r.pool for r in waiting if r.group_id not in groups}
    closed |= {by_id[a].pool for a in decision.preemptions if a in by_id}
    takes_work = {a.id for a in snapshot.agents if a.schedulable}
    free: dict[str, list[Request]] = {}
    for r in requests:
        if (
            r.running
            and r.group_id in groups
            and r.pool not in closed
            and r.slots_needed > 0
            and len(r.assignment) == 1
            and r.assignment[0][0] in takes_work
            and not r.preempting
            and not r.has_successor
        ):
            free.setdefault(r.group_id, []).append(r)
    pairs: dict[str, str] = {}
    for request in waiting:
        if request.group_id not in groups or request.pool in closed:
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
