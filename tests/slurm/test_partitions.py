"""Partitions -> resource pools (slot types from GRES, overrides)."""

from __future__ import annotations

from stalwart.hpc.slurm.parse import parse_sinfo
from stalwart.hpc.slurm.partitions import PartitionOverride, partitions_to_pools
from tests.slurm.conftest import fixture_text

# Constructed in the captured format (a multi-node cluster is not available to capture).
CLUSTER = """\
gpu01|gpu*|64|512000|gpu:a100:4(S:0-1)|mixed|2-00:00:00|16/48/0/64
gpu02|gpu*|64|512000|gpu:a100:4(S:0-1)|idle|2-00:00:00|0/64/0/64
gpu03|gpu*|64|512000|gpu:a100:4(S:0-1)|drained|2-00:00:00|0/0/64/64
amd01|amd|128|1024000|gpu:mi250:8|idle|1-00:00:00|0/128/0/128
cpu01|cpu|32|128000|(null)|allocated|infinite|32/0/0/32
cpu02|cpu|32|128000|(null)|idle|infinite|0/32/0/32
cpu03|cpu|32|128000|(null)|down*|infinite|0/0/32/32
"""


def test_pools_from_a_mixed_cluster() -> None:
    pools = {p.name: p for p in partitions_to_pools(parse_sinfo(CLUSTER))}
    assert list(pools) == ["gpu", "amd", "cpu"]
    gpu = pools["gpu"]
    assert (gpu.slot_type, gpu.default, gpu.nodes, gpu.usable_nodes) == ("cuda", True, 3, 2)
    assert (gpu.slots, gpu.slots_per_node, gpu.idle_slots) == (8, 4, None)
    assert gpu.gpu_types == ("a100",)
    assert gpu.description == "Slurm partition gpu: cuda GPUs (a100)"
    assert pools["amd"].slot_type == "rocm"
    cpu = pools["cpu"]
    assert (cpu.slot_type, cpu.slots, cpu.slots_per_node, cpu.idle_slots) == ("cpu", 64, 32, 32)
    assert cpu.time_limit == "infinite"


def test_overrides_and_cluster_slot_type_win_over_gres() -> None:
    nodes = parse_sinfo(CLUSTER)
    overrides = {"gpu": PartitionOverride(slot_type="cpu", description="CPUs of the GPU nodes")}
    pools = {p.name: p for p in partitions_to_pools(nodes, overrides)}
    assert (pools["gpu"].slot_type, pools["gpu"].slots) == ("cpu", 128)
    assert pools["gpu"].description == "CPUs of the GPU nodes"
    forced = {p.name: p for p in partitions_to_pools(nodes, slot_type="cuda")}
    assert forced["amd"].slot_type == "cuda"
    assert pools["amd"].slot_type == "rocm"


def test_pools_from_the_captured_single_node_slurm() -> None:
    pools = partitions_to_pools(parse_sinfo(fixture_text("sinfo_idle.stdout")))
    assert [(p.name, p.default, p.slot_type, p.slots) for p in pools] == [
        ("debug", True, "cuda", 2),
        ("urgent", False, "cuda", 2),
    ]
    drained = partitions_to_pools(parse_sinfo(fixture_text("sinfo_drained.stdout")))
    assert drained[0].usable_nodes == 0
    assert drained[0].slots == 0
