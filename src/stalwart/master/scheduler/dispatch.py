"""``schedule(snapshot)``: one scheduling round over every pool, each under its own scheduler."""

from __future__ import annotations

from stalwart.master.scheduler.fair_share import schedule_fair_share
from stalwart.master.scheduler.pool import PoolRound
from stalwart.master.scheduler.priority import schedule_priority
from stalwart.master.scheduler.snapshot import Decision, Placement, Snapshot

__all__ = ["schedule"]


def schedule(snapshot: Snapshot) -> Decision:
    """Decide one round: which pending requests start where, which running ones to preempt.

    Pure: the same snapshot always yields the same decision, and nothing is read or written
    besides the arguments. Pools are independent (an agent only serves its own pool's
    requests); each is decided by its ``PoolSettings.scheduler``.
    """
    assignments: dict[str, Placement] = {}
    reservations: dict[str, Placement] = {}
    preemptions: list[str] = []
    for pool in sorted({r.pool for r in snapshot.requests}):
        round_ = PoolRound(snapshot, pool)
        if round_.settings.scheduler == "fair_share":
            decision = schedule_fair_share(round_)
        else:
            decision = schedule_priority(round_)
        assignments.update(decision.assignments)
        reservations.update(decision.reservations)
        preemptions.extend(decision.preemptions)
    return Decision(
        assignments=assignments, preemptions=tuple(preemptions), reservations=reservations
    )
