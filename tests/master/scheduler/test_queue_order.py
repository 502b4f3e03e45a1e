"""``queue_order`` is the order the priority scheduler starts waiting work in: with one slot
freeing at a time, each round starts the first waiting request of ``queue_order``, the one the
job queue (``det job list``) lists first."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stalwart.master.scheduler import Request, Snapshot, queue_order, schedule
from tests.master.scheduler.helpers import agent

_requests = st.lists(
    st.tuples(st.integers(1, 99), st.integers(-50, 50)), min_size=1, max_size=8
).map(
    lambda pairs: [
        Request(
            allocation_id=f"a{i}",
            group_id=f"g{i}",
            slots_needed=1,
            priority=priority,
            submitted_order=order,
        )
        for i, (priority, order) in enumerate(pairs)
    ]
)


@given(_requests)
def test_one_slot_starts_the_queue_in_queue_order(requests: list[Request]) -> None:
    waiting = list(requests)
    started = []
    while waiting:
        decision = schedule(Snapshot(agents=(agent("n", 1),), requests=tuple(waiting)))
        assert len(decision.assignments) == 1
        (allocation_id,) = decision.assignments
        assert allocation_id == queue_order(waiting)[0].allocation_id
        started.append(allocation_id)
        waiting = [r for r in waiting if r.allocation_id != allocation_id]
    assert started == [r.allocation_id for r in queue_order(requests)]


def test_queue_order_is_priority_then_submission_then_id() -> None:
    reqs = [
        Request(allocation_id="b", group_id="1", slots_needed=1, priority=42, submitted_order=2),
        Request(allocation_id="a", group_id="1", slots_needed=1, priority=42, submitted_order=2),
        Request(allocation_id="t", group_id="t", slots_needed=1, priority=42, submitted_order=-9),
        Request(allocation_id="u", group_id="u", slots_needed=1, priority=10, submitted_order=5),
    ]
    assert [r.allocation_id for r in queue_order(reqs)] == ["u", "t", "a", "b"]
