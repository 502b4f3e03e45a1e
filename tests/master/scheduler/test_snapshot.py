"""Snapshot values refuse what cannot be true; ``schedule`` is pure and pools are independent."""

from __future__ import annotations

import pytest

from stalwart.master.scheduler import (
    DEFAULT_PRIORITY,
    AgentView,
    PoolSettings,
    Request,
    SlotView,
    Snapshot,
    queue_key,
    schedule,
)
from tests.master.scheduler.helpers import agent, running


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slots_needed": -1}, "slots_needed"),
        ({"priority": 0}, "priority"),
        ({"priority": 100}, "priority"),
        ({"weight": -1.0}, "weight"),
        ({"assignment": (("a", ("0",)),)}, "pending"),
        ({"running": True, "assignment": (("a", ("0",)),)}, "exactly"),
        ({"running": True, "slots_needed": 0, "assignment": (("a", ("0",)),)}, "zero-slot"),
    ],
)
def test_requests_refuse_impossible_values(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"allocation_id": "r", "group_id": "g", "slots_needed": 2}
    with pytest.raises(ValueError, match=message):
        Request(**{**base, **kwargs})  # type: ignore[arg-type]


def test_snapshots_refuse_duplicate_ids() -> None:
    with pytest.raises(ValueError, match="agent"):
        Snapshot(agents=(agent("a", 1), agent("a", 2)))
    with pytest.raises(ValueError, match="allocation"):
        Snapshot(requests=(Request("r", "g", 1), Request("r", "h", 1)))
    with pytest.raises(ValueError, match="slot"):
        AgentView("a", "p", (SlotView("0", "cuda"), SlotView("0", "cuda")))


def test_defaults_follow_determined() -> None:
    request = Request("r", "g", 1)
    assert request.priority == DEFAULT_PRIORITY == 42
    assert queue_key(request) == (42, 0, "r")
    assert Snapshot().settings_for("nowhere") == PoolSettings()


def test_schedule_is_pure_and_deterministic() -> None:
    snap = Snapshot(
        agents=(agent("a", 4, busy=[0]), agent("b", 4)),
        requests=(
            running("run", "g0", {"a": [0]}),
            Request("r1", "g1", 2, submitted_order=1),
            Request("r2", "g2", 4, submitted_order=2),
            Request("r3", "g3", 0, submitted_order=3),
        ),
    )
    first = schedule(snap)
    assert schedule(snap) == first
    assert set(first.assignments) == {"r1", "r2", "r3"}


def test_pools_are_scheduled_independently() -> None:
    snap = Snapshot(
        agents=(agent("a", 4, pool="gpu"), agent("b", 4, pool="other")),
        requests=(
            Request("r1", "g", 4, pool="gpu"),
            Request("r2", "g", 4, pool="gpu", submitted_order=1),
            Request("r3", "g", 4, pool="other"),
            Request("r4", "g", 1, pool="empty"),
        ),
        pools={"other": PoolSettings(scheduler="fair_share")},
    )
    decision = schedule(snap)
    assert decision.assignments == {
        "r1": (("a", ("0", "1", "2", "3")),),
        "r3": (("b", ("0", "1", "2", "3")),),
    }
