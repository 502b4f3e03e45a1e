"""Slurm partitions become Stalwart resource pools.

Contract: :func:`partitions_to_pools` is pure. A pool per partition, in sinfo's order, with:

- ``slot_type``: the partition's override, else the cluster-wide ``slot_type`` from the master
  config, else inferred from the GRES of its nodes: GPUs whose type looks AMD (``mi250``,
  ``amd``...) make it ``rocm``, other GPUs ``cuda``, no GPUs ``cpu``;
- ``slots``: GPUs (GPU pools) or CPUs (CPU pools) on the nodes that can take jobs now;
  ``slots_per_node``: the most any node has, which is what ``slots_per_node`` defaults to;
- ``idle_slots``: idle CPUs for CPU pools (sinfo does not show free GPUs; None there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stalwart.hpc.layout import SlotType
from stalwart.hpc.slurm.parse import SinfoNode

__all__ = ["PartitionOverride", "PartitionPool", "infer_slot_type", "partitions_to_pools"]


@dataclass(frozen=True)
class PartitionOverride:
    """``partition_overrides.<name>`` in the master config (the part that shapes pools)."""

    slot_type: SlotType | None = None
    description: str | None = None


@dataclass(frozen=True)
class PartitionPool:
    """One partition as a resource pool."""

    name: str
    default: bool
    slot_type: SlotType
    nodes: int
    usable_nodes: int
    slots: int
    slots_per_node: int
    idle_slots: int | None
    cpus_per_node: int
    memory_mb_per_node: int
    gpu_types: tuple[str, ...]
    time_limit: str
    description: str


_AMD = re.compile(r"^(mi\d+\w*|amd.*|radeon.*|instinct.*|rocm.*)$", re.I)


def infer_slot_type(nodes: Iterable[SinfoNode]) -> SlotType:
    """``cuda``/``rocm`` when any node has GPUs (by their types), else ``cpu``."""
    gpu_nodes = [n for n in nodes if n.gpus]
    if not gpu_nodes:
        return "cpu"
    types = {t for n in gpu_nodes for t in n.gpu_types}
    if types and all(_AMD.match(t) for t in types):
        return "rocm"
    return "cuda"


def partitions_to_pools(
    nodes: Iterable[SinfoNode],
    overrides: Mapping[str, PartitionOverride] | None = None,
    slot_type: SlotType | None = None,
) -> list[PartitionPool]:
    """Group sinfo's node rows by partition into pools (see the module docstring)."""
    overrides = overrides or {}
    grouped: dict[str, list[SinfoNode]] = {}
    for node in nodes:
        grouped.setdefault(node.partition, []).append(node)
    pools = []
    for name, members in grouped.items():
        override = overrides.get(name, PartitionOverride())
        kind = override.slot_type or slot_type or infer_slot_type(members)
        usable = [n for n in members if n.usable]
        per_node = [n.gpus if kind != "cpu" else n.cpus for n in usable]
        idle = sum(n.cpus_idle for n in usable) if kind == "cpu" else None
        types = tuple(sorted({t for n in members for t in n.gpu_types}))
        what = (
            f"{kind} slots"
            if kind == "cpu"
            else f"{kind} GPUs" + (f" ({', '.join(types)})" if types else "")
        )
        pools.append(
            PartitionPool(
                name=name,
                default=any(n.default for n in members),
                slot_type=kind,
                nodes=len(members),
                usable_nodes=len(usable),
                slots=sum(per_node),
                slots_per_node=max(per_node, default=0),
                idle_slots=idle,
                cpus_per_node=max((n.cpus for n in members), default=0),
                memory_mb_per_node=max((n.memory_mb for n in members), default=0),
                gpu_types=types,
                time_limit=members[0].time_limit,
                description=override.description or f"Slurm partition {name}: {what}",
            )
        )
    return pools
