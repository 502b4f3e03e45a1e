"""Per-group limits: ``max_slots`` and ``max_concurrent``.

A group's usage is what its running requests hold (preempting ones included: they hold their
slots until they exit) plus what this round has given it so far (started, or held for it after a
preemption). A request is refused when it would take its group past either limit; it then waits
for its own group and never holds anything for itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stalwart.master.scheduler.snapshot import GroupLimits, Request

__all__ = ["GroupBook"]


class GroupBook:
    """Counts slots and allocations per group and checks new ones against the limits."""

    def __init__(self, limits: Mapping[str, GroupLimits], running: Iterable[Request]) -> None:
        self._limits = limits
        self._slots: dict[str, int] = {}
        self._count: dict[str, int] = {}
        for request in running:
            self.add(request)

    def limits_of(self, group_id: str) -> GroupLimits | None:
        """The group's limits, if any were given."""
        return self._limits.get(group_id)

    def slots(self, group_id: str) -> int:
        """Slots the group uses or has been given this round."""
        return self._slots.get(group_id, 0)

    def count(self, group_id: str) -> int:
        """Allocations the group runs or has been given this round."""
        return self._count.get(group_id, 0)

    def allows(self, request: Request) -> bool:
        """Whether giving ``request`` its slots keeps its group within its limits."""
        limits = self._limits.get(request.group_id)
        if limits is None:
            return True
        if (
            limits.max_slots is not None
            and self.slots(request.group_id) + request.slots_needed > limits.max_slots
        ):
            return False
        return limits.max_concurrent is None or self.count(request.group_id) < limits.max_concurrent

    def add(self, request: Request) -> None:
        """Count ``request`` against its group."""
        group = request.group_id
        self._slots[group] = self.slots(group) + request.slots_needed
        self._count[group] = self.count(group) + 1
