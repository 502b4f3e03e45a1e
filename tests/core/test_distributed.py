"""DistributedContext in one process: ranks, constructors, and how a group refuses to form.

Groups of several workers are built here from threads (each worker has its own sockets, as a
process would); ``test_distributed_processes.py`` runs real processes.
"""

from __future__ import annotations

import concurrent.futures
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from stalwart.core import (
    CollectiveError,
    CollectiveTimeoutError,
    DistributedContext,
    DummyDistributedContext,
    TaskEnvError,
)
from stalwart.core.env import comm_env, deepspeed_launcher_env, launcher_rank, torch_launcher_env

TORCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pair(
    port: int, rank: int, *, key: str = "k", setup_timeout_s: float = 10.0
) -> DistributedContext:
    """Rank ``rank`` of two workers on one node."""
    return DistributedContext(
        rank=rank,
        size=2,
        local_rank=rank,
        local_size=2,
        cross_rank=0,
        cross_size=1,
        pub_port=port,
        key=key,
        timeout_s=10.0,
        setup_timeout_s=setup_timeout_s,
    )


def in_threads(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once; each one's value, or the exception it raised."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        out: list[Any] = []
        for future in futures:
            try:
                out.append(future.result(timeout=30))
            except Exception as exc:
                out.append(exc)
        return out


def test_dummy_is_rank_0_of_1() -> None:
    dist = DummyDistributedContext()
    assert (dist.rank, dist.size, dist.local_rank, dist.local_size) == (0, 1, 0, 1)
    assert (dist.get_cross_rank(), dist.get_cross_size(), dist.get_num_agents()) == (0, 1, 1)
    assert dist.allgather("x") == ["x"]
    assert dist.gather("x") == ["x"]
    assert dist.broadcast("x") == "x"
    assert dist.allgather_local(1) == [1]
    assert dist.gather_local(1) == [1]
    assert dist.broadcast_local(1) == 1
    dist.barrier()
    dist.close()
    dist.close()


def test_ranks_are_checked() -> None:
    with pytest.raises(ValueError, match="rank must be in"):
        DistributedContext(rank=2, size=2, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
    with pytest.raises(ValueError, match="local_rank must equal rank"):
        DistributedContext(rank=1, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1)
    with pytest.raises(ValueError, match="cannot exceed"):
        DistributedContext(rank=0, size=2, local_rank=0, local_size=3, cross_rank=0, cross_size=1)


def test_several_nodes_need_the_chief_address() -> None:
    with pytest.raises(ValueError, match="needs chief_ip"):
        DistributedContext(rank=1, size=2, local_rank=0, local_size=1, cross_rank=1, cross_size=2)


def test_two_workers_in_threads() -> None:
    port = free_port()

    def worker(rank: int) -> Any:
        dist = pair(port, rank)
        try:
            return (dist.allgather(rank), dist.broadcast(rank + 100), dist.gather(rank))
        finally:
            dist.close()

    chief, other = in_threads(lambda: worker(0), lambda: worker(1))
    assert chief == ([0, 1], 100, [0, 1])
    assert other == ([0, 1], 100, None)


def test_a_wrong_key_is_refused_and_does_not_break_the_group() -> None:
    port = free_port()

    def chief() -> Any:
        dist = pair(port, 0, key="right")
        try:
            return dist.allgather("chief")
        finally:
            dist.close()

    def intruder() -> Any:
        time.sleep(0.2)
        return pair(port, 1, key="wrong")

    def stray() -> Any:  # not even our protocol: garbage, then gone
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
                    return "sent"
            except OSError:
                time.sleep(0.05)
        return "no chief"

    def honest() -> Any:
        time.sleep(0.6)
        dist = pair(port, 1, key="right")
        try:
            return dist.allgather("worker")
        finally:
            dist.close()

    got = in_threads(chief, intruder, stray, honest)
    assert got[0] == ["chief", "worker"]
    assert isinstance(got[1], CollectiveError)
    assert "refused rank 1: wrong key" in str(got[1])
    assert got[2] == "sent"
    assert got[3] == ["chief", "worker"]


def test_a_missing_worker_or_chief_times_out() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(CollectiveTimeoutError, match=r"ranks \[1\] of 2 did not connect"):
        pair(port, 0, setup_timeout_s=0.5)
    with pytest.raises(CollectiveTimeoutError, match="could not reach the chief"):
        pair(port, 1, setup_timeout_s=0.5)
    assert time.monotonic() - started < 5


def test_a_taken_port_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(CollectiveError, match=f"cannot listen on 127.0.0.1:{port}"):
            pair(port, 0)


def test_a_closed_group_refuses_collectives_and_unpicklable_values_fail_early() -> None:
    port = free_port()

    def worker(rank: int) -> Any:
        dist = pair(port, rank)
        if rank == 1:
            with pytest.raises(TypeError):  # raised before anything is sent: still in step
                dist.allgather(lambda: None)
        value = dist.allgather(rank)
        dist.close()
        with pytest.raises(CollectiveError, match="closed"):
            dist.barrier()
        return value

    assert in_threads(lambda: worker(0), lambda: worker(1)) == [[0, 1], [0, 1]]


def _set_torch_env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name in (*TORCH_VARS, "GROUP_WORLD_SIZE", "DET_CHIEF_IP", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def test_from_torch_distributed_reads_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_torch_env(monkeypatch)
    with pytest.raises(KeyError):
        DistributedContext.from_torch_distributed()
    one = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    one["GROUP_RANK"] = "0"
    _set_torch_env(monkeypatch, **one)
    assert DistributedContext.from_torch_distributed().size == 1
    ranks = torch_launcher_env(
        {**one, "RANK": "5", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"}
    )
    assert (ranks.rank, ranks.size, ranks.cross_rank, ranks.cross_size) == (5, 8, 1, 2)
    assert torch_launcher_env({**one, "GROUP_WORLD_SIZE": "1"}).cross_size == 1


def test_from_deepspeed_and_horovod(monkeypatch: pytest.MonkeyPatch) -> None:
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE")
    for name in names:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(KeyError):
        DistributedContext.from_deepspeed()
    for name, value in zip(names, ("0", "1", "0", "1", "0", "1"), strict=True):
        monkeypatch.setenv(name, value)
    assert DistributedContext.from_deepspeed().size == 1
    ranks = deepspeed_launcher_env(dict(zip(names, ("3", "4", "1", "2", "1", "2"), strict=True)))
    assert (ranks.local_rank, ranks.local_size, ranks.cross_rank) == (1, 2, 1)

    class FakeHorovod:
        def rank(self) -> int:
            return 0

        size = local_rank = local_size = cross_rank = cross_size = None

    hvd = FakeHorovod()
    hvd.size = hvd.local_size = hvd.cross_size = lambda: 1  # type: ignore[assignment]
    hvd.local_rank = hvd.cross_rank = lambda: 0  # type: ignore[assignment]
    dist = DistributedContext.from_horovod(hvd)
    assert (dist.rank, dist.size, dist.get_num_agents()) == (0, 1, 1)


def test_comm_env_finds_the_chief_ports_and_key() -> None:
    env = comm_env(
        {
            "DET_CHIEF_IP": "10.0.0.1",
            "MASTER_ADDR": "10.0.0.9",
            "INTER_TRAIN_PROCESS_COMM_PORT_1": "12461",
            "C10D_PORT": "29501",
            "DET_SESSION_TOKEN": "tok",
        }
    )
    assert env.chief_ip == "10.0.0.1"
    assert (env.ports.comm_1, env.ports.comm_2, env.ports.c10d) == (12461, 12365, 29501)
    assert env.key == "tok"
    assert comm_env({"MASTER_ADDR": "10.0.0.9"}).chief_ip == "10.0.0.9"
    assert comm_env({}).chief_ip is None
    with pytest.raises(TaskEnvError, match="C10D_PORT is not a port number"):
        comm_env({"C10D_PORT": "http"})
    assert launcher_rank({"RANK": "3"}) == 3
    assert launcher_rank({}) is None
