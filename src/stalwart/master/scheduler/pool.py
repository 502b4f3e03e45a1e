"""One pool's working state during one scheduling round (private to the policies).

It splits what the snapshot says into:

- ``now``: usable slots that are free (enabled slot, schedulable agent, held by no running
  request) and the auxiliary containers still open on each agent;
- ``soon``: per running request being preempted (already, or in this round), the usable
  resources it will give back;
- ``held``: resources promised this round to a request that cannot start yet.

and collects the decision. Nothing here outlives the round.
"""

from __future__ import annotations

from collections import Counter

from stalwart.master.scheduler.fitting import Avail, PoolModel
from stalwart.master.scheduler.limits import GroupBook
from stalwart.master.scheduler.snapshot import (
    Decision,
    Placement,
    PoolSettings,
    Request,
    Snapshot,
    queue_order,
)

__all__ = ["PoolRound", "ranks_ahead"]


def ranks_ahead(a: Request, b: Request) -> bool:
    """Whether ``a`` is ahead of ``b`` in the queue: a smaller priority number, or the same
    priority and an earlier ``submitted_order``. Requests of the same job position are equal
    (neither ranks ahead)."""
    return (a.priority, a.submitted_order) < (b.priority, b.submitted_order)


class PoolRound:
    """The working state of one pool (see the module docstring)."""

    def __init__(self, snapshot: Snapshot, pool: str) -> None:
        self.pool = pool
        self.settings: PoolSettings = snapshot.settings_for(pool)
        agents = [a for a in snapshot.agents if a.pool == pool]
        self.model = PoolModel(agents, self.settings.max_aux_containers_per_agent)
        requests = queue_order(r for r in snapshot.requests if r.pool == pool)
        self.running = [r for r in requests if r.running]
        self.pending = [r for r in requests if not r.running]
        self.book = GroupBook({g.group_id: g for g in snapshot.groups}, self.running)

        taken = {(a, s) for r in self.running for a, slots in r.assignment for s in slots}
        aux_used = Counter(r.assignment[0][0] for r in self.running if r.slots_needed == 0)
        self.now = Avail()
        for agent in agents:
            layout = self.model.layouts.get(agent.id)
            if layout is None:
                continue
            self.now.slots[agent.id] = {
                s.id for s in agent.slots if s.free and s.enabled and (agent.id, s.id) not in taken
            }
            self.now.aux[agent.id] = max(0, layout.aux_limit - aux_used[agent.id])
        self.held = Avail()
        self.soon: dict[str, Avail] = {}
        self.owners: dict[str, Request] = {}
        for request in self.running:
            if request.preempting:
                self._add_soon(request)

        self.assignments: dict[str, Placement] = {}
        self.reservations: dict[str, Placement] = {}
        self.preemptions: list[str] = []

    def usable_part(self, placement: Placement) -> Avail:
        """The resources of ``placement`` that new work could use (on schedulable agents)."""
        out = Avail()
        for agent, slots in placement:
            if agent not in self.model.layouts:
                continue
            if slots:
                usable = {s for s in slots if self.model.usable(agent, s)}
                out.slots.setdefault(agent, set()).update(usable)
            else:
                out.aux[agent] = out.aux.get(agent, 0) + 1
        return out

    def _add_soon(self, request: Request) -> None:
        self.soon[request.allocation_id] = self.usable_part(request.assignment).minus(self.held)
        self.owners[request.allocation_id] = request

    def soon_for(self, request: Request) -> Avail:
        """What preempted requests ranked behind ``request`` will give back: only a request
        ahead of them may count on it (so a preempted request is never displaced by work it
        outranks)."""
        out = Avail()
        for owner_id, avail in self.soon.items():
            if ranks_ahead(request, self.owners[owner_id]):
                out.merge(avail)
        return out

    def preempt(self, victim: Request) -> None:
        """Ask ``victim`` to release its slots; they count as coming back soon."""
        self.preemptions.append(victim.allocation_id)
        self._add_soon(victim)

    def start(self, request: Request, placement: Placement) -> None:
        """Start ``request`` now on free resources."""
        self.assignments[request.allocation_id] = placement
        self.now.remove(placement)
        self.book.add(request)

    def hold(self, request: Request, placement: Placement, *, counts: bool) -> None:
        """Promise ``placement`` to ``request``, which cannot start yet: nobody later in this
        round may take what of it is free or freeing. ``counts``: the request will start on it
        once preempted work exits, so it counts against its group now."""
        self.reservations[request.allocation_id] = placement
        for agent, slots in placement:
            if slots:
                self.held.slots.setdefault(agent, set()).update(slots)
                self.now.slots.get(agent, set()).difference_update(slots)
                for avail in self.soon.values():
                    avail.slots.get(agent, set()).difference_update(slots)
                continue
            self.held.aux[agent] = self.held.aux.get(agent, 0) + 1
            if self.now.aux.get(agent, 0) > 0:
                self.now.aux[agent] -= 1
                continue
            for owner_id, avail in self.soon.items():
                if avail.aux.get(agent, 0) > 0 and ranks_ahead(request, self.owners[owner_id]):
                    avail.aux[agent] -= 1
                    break
        if counts:
            self.book.add(request)

    def decision(self) -> Decision:
        return Decision(
            assignments=dict(self.assignments),
            preemptions=tuple(self.preemptions),
            reservations=dict(self.reservations),
        )
