"""DistributedContext across real processes: the collectives, and failures that never hang.

Each test starts one process per worker (``spawn``: nothing of pytest's state is inherited),
runs a scenario function of this module in each and collects what every worker returned (or
the error it raised). Every wait is bounded.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from stalwart.core import CollectiveTimeoutError, DistributedContext

RESULT_TIMEOUT_S = 60.0
Scenario = Callable[[DistributedContext], Any]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Layout:
    """``nodes`` x ``per_node`` workers on this machine; ``nodes > 1`` pretends to be several
    hosts (the chief's address is 127.0.0.1 either way)."""

    nodes: int
    per_node: int
    port: int
    force_tcp: bool = False
    timeout_s: float = 20.0

    def context(self, rank: int) -> DistributedContext:
        return DistributedContext(
            rank=rank,
            size=self.nodes * self.per_node,
            local_rank=rank % self.per_node,
            local_size=self.per_node,
            cross_rank=rank // self.per_node,
            cross_size=self.nodes,
            chief_ip="127.0.0.1",
            pub_port=self.port,
            force_tcp=self.force_tcp,
            key="allocation-token",
            timeout_s=self.timeout_s,
            setup_timeout_s=20.0,
        )


def _worker(layout: Layout, rank: int, scenario: Scenario, out: Any) -> None:
    try:
        dist = layout.context(rank)
        try:
            value = scenario(dist)
        finally:
            dist.close()
        out.put((rank, "ok", value))
    except BaseException as exc:
        out.put((rank, type(exc).__name__, str(exc)))


def run(layout: Layout, scenario: Scenario) -> dict[int, tuple[str, Any]]:
    """Run ``scenario`` in one process per worker; ``{rank: (outcome, value)}`` of those that
    reported (a worker that exits without reporting is missing)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    size = layout.nodes * layout.per_node
    procs = [ctx.Process(target=_worker, args=(layout, r, scenario, out)) for r in range(size)]
    for proc in procs:
        proc.start()
    results: dict[int, tuple[str, Any]] = {}
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    try:
        while len(results) < size and time.monotonic() < deadline:
            if all(not p.is_alive() for p in procs) and out.empty():
                break
            try:
                rank, outcome, value = out.get(timeout=0.2)
            except queue.Empty:
                continue
            results[rank] = (outcome, value)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        out.close()
        out.join_thread()
    return results


# Scenarios (module level, so that spawned processes can import them).


def everything(dist: DistributedContext) -> dict[str, Any]:
    rank = dist.get_rank()
    big = bytes([rank]) * (3 * 1024 * 1024)  # several MiB through the hub
    out = {
        "allgather": dist.allgather(rank * 10),
        "gather": dist.gather({"rank": rank}),
        "broadcast": dist.broadcast(f"from {rank}"),
        "allgather_local": dist.allgather_local(rank),
        "gather_local": dist.gather_local(rank),
        "broadcast_local": dist.broadcast_local(f"local chief is {rank}"),
    }
    dist.barrier()
    out["big"] = [len(b) and b[0] for b in dist.allgather(big)]
    out["again"] = dist.allgather(rank)
    return out


def chief_crashes(dist: DistributedContext) -> Any:
    dist.barrier()
    if dist.get_rank() == 0:
        os._exit(3)
    started = time.monotonic()
    try:
        dist.allgather("x")
    finally:
        elapsed = time.monotonic() - started
    return elapsed


def worker_crashes(dist: DistributedContext) -> Any:
    dist.barrier()
    if dist.get_rank() == 2:
        os._exit(3)
    return dist.allgather("x")


def chief_stalls(dist: DistributedContext) -> Any:
    if dist.get_rank() == 0:
        time.sleep(2.5)  # never calls the collective within the workers' timeout
        return "stalled"
    started = time.monotonic()
    try:
        dist.broadcast(None)
    except CollectiveTimeoutError:
        return ("timed out", time.monotonic() - started)
    return "no timeout"


def mismatched(dist: DistributedContext) -> Any:
    if dist.get_rank() == 1:
        return dist.broadcast("b")
    return dist.allgather("a")


# Tests.


@pytest.mark.parametrize(
    ("nodes", "per_node", "force_tcp"),
    [(1, 3, False), (2, 2, False), (2, 2, True)],
    ids=["one-node", "two-nodes-unix", "two-nodes-tcp"],
)
def test_collectives_across_processes(nodes: int, per_node: int, force_tcp: bool) -> None:
    layout = Layout(nodes, per_node, free_port(), force_tcp=force_tcp)
    results = run(layout, everything)
    size = nodes * per_node
    assert sorted(results) == list(range(size)), results
    for rank, (outcome, got) in results.items():
        assert outcome == "ok", (rank, got)
        local_rank = rank % per_node
        node_ranks = list(range(rank - local_rank, rank - local_rank + per_node))
        assert got["allgather"] == [r * 10 for r in range(size)]
        assert got["gather"] == ([{"rank": r} for r in range(size)] if rank == 0 else None)
        assert got["broadcast"] == "from 0"
        assert got["allgather_local"] == node_ranks
        assert got["gather_local"] == (node_ranks if local_rank == 0 else None)
        assert got["broadcast_local"] == f"local chief is {node_ranks[0]}"
        assert got["big"] == list(range(size))
        assert got["again"] == list(range(size))


def test_a_chief_crash_fails_the_workers_at_once() -> None:
    results = run(Layout(1, 3, free_port()), chief_crashes)
    assert 0 not in results  # it died
    for rank in (1, 2):
        outcome, message = results[rank]
        assert outcome == "CollectiveError", message
        assert "the chief" in message
        assert "closed the connection during allgather" in message


def test_a_worker_crash_fails_the_others_and_names_it() -> None:
    results = run(Layout(1, 3, free_port()), worker_crashes)
    assert 2 not in results
    for rank in (0, 1):
        outcome, message = results[rank]
        assert outcome == "CollectiveError", message
        assert "rank 2 left the group during allgather" in message


def test_a_stalled_chief_times_out_the_workers() -> None:
    results = run(Layout(1, 2, free_port(), timeout_s=1.0), chief_stalls)
    outcome, value = results[1]
    assert outcome == "ok"
    assert value[0] == "timed out"
    assert 0.9 < value[1] < 3.5


def test_mismatched_collectives_fail_on_every_worker() -> None:
    results = run(Layout(1, 3, free_port()), mismatched)
    assert sorted(results) == [0, 1, 2]
    for rank, (outcome, message) in results.items():
        assert outcome == "CollectiveError", (rank, message)
        assert "collective mismatch" in message
        assert "rank 1 called broadcast" in message
