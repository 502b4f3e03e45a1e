"""Gang fitting: the slots a request would get, all of them or none.

Rules (Determined's ``fitting.go``, with the heterogeneous case solved exactly):

1. **One agent first.** Among schedulable agents with at least ``slots_needed`` available slots
   of the request's device type, *best* fit takes the agent with the fewest available slots,
   *worst* fit the least used one (largest available fraction, then most available). Ties go
   to the agent whose hashed id is nearest the hashed allocation id (a deterministic spread, so
   equal agents share the load), then to the smaller agent id.
2. **Else several whole agents** (only for ``slots_needed > 1`` and not ``is_single_node``):
   a distributed task takes *every* slot of each agent it uses, and only idle agents qualify.
   Agents of equal size are used first, the largest size that divides ``slots_needed`` (fewest
   agents); with ``allow_heterogeneous_fits`` agents of different sizes may be combined: the
   fewest agents whose sizes sum exactly to ``slots_needed`` (Determined tries largest-first
   greedily and misses e.g. 12 = 6 + 6 beside an 8).
3. Slots of another device type, disabled slots, disabled or draining agents and the request's
   ``blocked_agents`` (a trial's ``exclude_node`` log policies) are never used.
4. A zero-slot request takes one auxiliary container on one agent (at most
   ``max_aux_containers_per_agent`` per agent): best fit fills the busiest agent, worst fit the
   emptiest.

Fitting is monotone: with fewer available slots a request never fits where it did not fit
before. The priority scheduler's ordering guarantees rely on that.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

from stalwart.master.scheduler.snapshot import (
    AgentView,
    FittingPolicy,
    Placement,
    Request,
)

__all__ = ["AgentLayout", "Avail", "PoolModel", "fit", "reserve", "stable_hash"]


def stable_hash(text: str) -> int:
    """A 64-bit hash that is the same in every process (unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class AgentLayout:
    """The static facts about a schedulable agent: its usable slots by device type (in the
    agent's own order) and how many auxiliary containers it may run."""

    id: str
    slots: dict[str, tuple[str, ...]]
    aux_limit: int
    hash: int


class PoolModel:
    """The schedulable agents of one pool, in agent-id order."""

    def __init__(self, agents: Iterable[AgentView], max_aux: int) -> None:
        self.layouts: dict[str, AgentLayout] = {}
        for agent in sorted(agents, key=lambda a: a.id):
            if not agent.schedulable:
                continue
            by_type: dict[str, list[str]] = {}
            for slot in agent.slots:
                if slot.enabled:
                    by_type.setdefault(slot.device_type, []).append(slot.id)
            self.layouts[agent.id] = AgentLayout(
                id=agent.id,
                slots={k: tuple(v) for k, v in by_type.items()},
                aux_limit=max_aux,
                hash=stable_hash(agent.id),
            )

        self._types = {
            (lay.id, slot): device_type
            for lay in self.layouts.values()
            for device_type, ids in lay.slots.items()
            for slot in ids
        }

    def usable(self, agent_id: str, slot_id: str) -> bool:
        """Whether the slot may take new work (agent schedulable, slot enabled)."""
        return (agent_id, slot_id) in self._types

    def type_of(self, agent_id: str, slot_id: str) -> str | None:
        """The device type of a usable slot (``None`` if it is not usable)."""
        return self._types.get((agent_id, slot_id))

    def full(self) -> Avail:
        """Everything usable: all usable slots, every auxiliary container."""
        return Avail(
            {a: {s for ids in lay.slots.values() for s in ids} for a, lay in self.layouts.items()},
            {a: lay.aux_limit for a, lay in self.layouts.items()},
        )

    def capacity(self, device_type: str) -> int:
        """Usable slots of one device type."""
        return sum(len(lay.slots.get(device_type, ())) for lay in self.layouts.values())


class Avail:
    """A mutable set of available resources: slot ids per agent, and a count of auxiliary
    containers per agent. Policies keep several (free now, freeing soon, held) and combine them.
    """

    __slots__ = ("aux", "slots")

    def __init__(
        self, slots: dict[str, set[str]] | None = None, aux: dict[str, int] | None = None
    ) -> None:
        self.slots: dict[str, set[str]] = slots if slots is not None else {}
        self.aux: dict[str, int] = aux if aux is not None else {}

    def copy(self) -> Avail:
        return Avail({a: set(s) for a, s in self.slots.items()}, dict(self.aux))

    def union(self, other: Avail) -> Avail:
        """A new ``Avail`` holding both (auxiliary counts add up)."""
        out = self.copy()
        out.merge(other)
        return out

    def merge(self, other: Avail) -> None:
        """Add ``other``'s resources to these (auxiliary counts add up)."""
        for agent, slots in other.slots.items():
            self.slots.setdefault(agent, set()).update(slots)
        for agent, n in other.aux.items():
            self.aux[agent] = self.aux.get(agent, 0) + n

    def minus(self, other: Avail) -> Avail:
        """A new ``Avail`` without ``other``'s resources."""
        out = self.copy()
        for agent, slots in other.slots.items():
            if agent in out.slots:
                out.slots[agent] -= slots
        for agent, n in other.aux.items():
            if agent in out.aux:
                out.aux[agent] = max(0, out.aux[agent] - n)
        return out

    def add(self, placement: Placement) -> None:
        for agent, slots in placement:
            if slots:
                self.slots.setdefault(agent, set()).update(slots)
            else:
                self.aux[agent] = self.aux.get(agent, 0) + 1

    def remove(self, placement: Placement) -> None:
        """Take a placement's resources out (those it does not hold are ignored)."""
        for agent, slots in placement:
            if slots:
                if agent in self.slots:
                    self.slots[agent].difference_update(slots)
            elif self.aux.get(agent, 0) > 0:
                self.aux[agent] -= 1

    def count(self, agent: str, slots: Iterable[str]) -> int:
        have = self.slots.get(agent, set())
        return sum(1 for s in slots if s in have)


AgentKey = Callable[[AgentLayout, int, int], tuple[object, ...]]
"""Orders candidate agents (smaller first) from (layout, available, total)."""


def _policy_key(policy: FittingPolicy, request: Request) -> AgentKey:
    req_hash = stable_hash(request.allocation_id)

    def key(layout: AgentLayout, available: int, total: int) -> tuple[object, ...]:
        distance = (req_hash - layout.hash) % (1 << 64)
        if policy == "best":
            return (available, distance, layout.id)
        return (-Fraction(available, max(total, 1)), -available, distance, layout.id)

    return key


def fit(
    request: Request,
    view: Avail,
    model: PoolModel,
    policy: FittingPolicy,
    allow_heterogeneous: bool,
) -> Placement | None:
    """Where ``request`` fits within ``view``, per the module's rules, or ``None``."""
    key = _policy_key(policy, request)
    if request.slots_needed == 0:
        return _fit_aux(view, model, key, request.blocked_agents)
    return _fit_slots(request, view, model, key, allow_heterogeneous, prefer=None)


def reserve(
    request: Request,
    eventual: Avail,
    prefer: Avail,
    model: PoolModel,
    allow_heterogeneous: bool,
) -> Placement | None:
    """The placement to hold for a waiting slot request.

    ``eventual`` is what could ever be the request's (busy slots included). The shape follows
    :func:`fit` (one agent if one could ever hold it, else whole agents), but among candidate
    agents the one with the most ``prefer`` (free now or freeing soon) slots wins, and on an agent
    those slots are taken first: the hold covers what is already free and the request is as
    close to starting as it can be. ``None`` when the request can never fit.
    """
    req_hash = stable_hash(request.allocation_id)

    def key(layout: AgentLayout, available: int, total: int) -> tuple[object, ...]:
        if request.slots_needed == 0:
            ready = prefer.aux.get(layout.id, 0)
        else:
            ready = prefer.count(layout.id, layout.slots.get(request.device_type, ()))
        distance = (req_hash - layout.hash) % (1 << 64)
        return (-ready, distance, layout.id)

    if request.slots_needed == 0:
        return _fit_aux(eventual, model, key, request.blocked_agents)
    return _fit_slots(request, eventual, model, key, allow_heterogeneous, prefer=prefer)


def _fit_aux(
    view: Avail, model: PoolModel, key: AgentKey, blocked: frozenset[str]
) -> Placement | None:
    candidates = [
        (key(lay, view.aux.get(lay.id, 0), lay.aux_limit), lay.id)
        for lay in model.layouts.values()
        if view.aux.get(lay.id, 0) > 0 and lay.id not in blocked
    ]
    if not candidates:
        return None
    return ((min(candidates)[1], ()),)


def _fit_slots(
    request: Request,
    view: Avail,
    model: PoolModel,
    key: AgentKey,
    allow_heterogeneous: bool,
    prefer: Avail | None,
) -> Placement | None:
    need = request.slots_needed
    rows: list[tuple[AgentLayout, list[str], int]] = []
    for lay in model.layouts.values():
        usable = lay.slots.get(request.device_type, ())
        if not usable or lay.id in request.blocked_agents:
            continue
        have = view.slots.get(lay.id, set())
        rows.append((lay, [s for s in usable if s in have], len(usable)))

    def choose(lay: AgentLayout, available: list[str], n: int) -> tuple[str, ...]:
        if prefer is None:
            return tuple(available[:n])
        ready = prefer.slots.get(lay.id, set())
        picked = set(sorted(available, key=lambda s: s not in ready)[:n])  # stable sort
        return tuple(s for s in available if s in picked)

    single = [(key(lay, len(av), total), lay, av) for lay, av, total in rows if len(av) >= need]
    if single:
        _, lay, av = min(single, key=lambda c: c[0])
        return ((lay.id, choose(lay, av, need)),)
    if need <= 1 or request.is_single_node:
        return None

    idle: dict[int, list[tuple[tuple[object, ...], AgentLayout, list[str]]]] = {}
    for lay, av, total in rows:
        if len(av) == total:
            idle.setdefault(total, []).append((key(lay, total, total), lay, av))
    for group in idle.values():
        group.sort(key=lambda c: c[0])
    sizes = sorted(idle, reverse=True)
    for size in sizes:
        if need % size == 0 and len(idle[size]) * size >= need:
            return _whole(idle[size][: need // size])
    if not allow_heterogeneous:
        return None
    counts = _fewest_agents([(s, len(idle[s])) for s in sizes], need)
    if counts is None:
        return None
    chosen = [c for size, k in zip(sizes, counts, strict=True) for c in idle[size][:k]]
    return _whole(chosen)


def _whole(chosen: Sequence[tuple[object, AgentLayout, list[str]]]) -> Placement:
    return tuple(sorted((lay.id, tuple(av)) for _, lay, av in chosen))


def _fewest_agents(sizes: list[tuple[int, int]], need: int) -> tuple[int, ...] | None:
    """How many agents of each (size, available count) to take so that the sizes sum exactly
    to ``need`` with the fewest agents; ``None`` if no combination does. Larger agents are
    preferred among equally short answers."""

    @cache
    def go(i: int, rest: int) -> tuple[int, tuple[int, ...]] | None:
        if rest == 0:
            return (0, (0,) * (len(sizes) - i))
        if i == len(sizes):
            return None
        size, count = sizes[i]
        best: tuple[int, tuple[int, ...]] | None = None
        for k in range(min(count, rest // size), -1, -1):
            sub = go(i + 1, rest - k * size)
            if sub is not None and (best is None or k + sub[0] < best[0]):
                best = (k + sub[0], (k, *sub[1]))
        return best

    found = go(0, need)
    go.cache_clear()
    return None if found is None else found[1]
