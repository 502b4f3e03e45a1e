"""DistributedContext: one process works; several are refused until comms land."""

from __future__ import annotations

import pytest

from stalwart.core import DistributedContext, DummyDistributedContext


def test_dummy_is_rank_0_of_1() -> None:
    dist = DummyDistributedContext()
    assert (dist.rank, dist.size, dist.local_rank, dist.local_size) == (0, 1, 0, 1)
    assert (dist.get_cross_rank(), dist.get_cross_size()) == (0, 1)
    assert dist.allgather("x") == ["x"]
    assert dist.gather("x") == ["x"]
    assert dist.broadcast("x") == "x"
    assert dist.allgather_local(1) == [1]
    assert dist.gather_local(1) == [1]
    assert dist.broadcast_local(1) == 1
    dist.barrier()
    dist.close()


def test_several_processes_are_not_supported_yet() -> None:
    dist = DistributedContext(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1
    )
    assert dist.get_rank() == 1
    with pytest.raises(NotImplementedError, match="across 2 processes"):
        dist.allgather(1)
    with pytest.raises(NotImplementedError):
        dist.barrier()


def test_ranks_are_checked() -> None:
    with pytest.raises(ValueError, match="rank must be in"):
        DistributedContext(rank=2, size=2, local_rank=0, local_size=1, cross_rank=0, cross_size=1)


def test_from_torch_distributed_without_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(KeyError):
        DistributedContext.from_torch_distributed()
    for name, value in (
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("LOCAL_RANK", "0"),
        ("LOCAL_WORLD_SIZE", "1"),
        ("GROUP_RANK", "0"),
    ):
        monkeypatch.setenv(name, value)
    assert DistributedContext.from_torch_distributed().size == 1
