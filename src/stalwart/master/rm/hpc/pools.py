"""Slurm partitions (PBS queues) as the master's resource pools, for the API.

Contract:

- :func:`partition_views` turns the manager's partitions (one ``sinfo``; PBS: ``qstat -Q`` and
  ``pbsnodes``; cached by the manager) into :class:`~stalwart.master.services.agents.PoolView`
  rows plus each pool's GPU types, with the queue counts of Stalwart's own allocations. Under
  Slurm (PBS) an allocation that is ASSIGNED waits in the batch system's queue, so it counts as
  queued, not scheduled. Slots used: the pool's slots minus its idle ones when the batch system
  tells them (sinfo: CPU partitions; pbsnodes: every queue), else Stalwart's running slots.
- :func:`check_pool` refuses a resource pool that is not a partition (a PBS queue), with the
  partitions (sorted) in the message. It refuses nothing while no answer is known (the batch
  system's own ``sbatch``/``qsub`` still refuses an unknown partition then), and ``default`` is
  always accepted (it is the configured ``default_partition``, else the batch system's default
  one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError
from stalwart.hpc.slurm.partitions import PartitionPool
from stalwart.master.db.tables import Allocation
from stalwart.master.services.agents import PoolView
from stalwart.master.transitions import LIVE_ALLOCATION_STATES

if TYPE_CHECKING:
    from stalwart.master.rm.hpc.manager import HpcManager

__all__ = ["PartitionView", "check_pool", "partition_views"]

_RUNNING = ("STARTING", "RUNNING", "TERMINATING")


@dataclass(frozen=True)
class PartitionView:
    """One partition as a pool: the API's :class:`PoolView`, and what only the batch system
    knows."""

    view: PoolView
    default: bool
    gpu_types: tuple[str, ...]
    partition: PartitionPool


def _default_partition(manager: HpcManager, pools: list[PartitionPool]) -> str | None:
    if manager.slurm.default_partition:
        return manager.slurm.default_partition
    return next((p.name for p in pools if p.default), None)


def partition_views(manager: HpcManager, session: Session) -> list[PartitionView]:
    """Every partition (the batch system's order) as a pool view (see the module docstring)."""
    pools = manager.pools()
    default = _default_partition(manager, pools)
    counts: dict[tuple[str, bool], int] = {}
    used: dict[str, int] = {}
    rows = session.execute(
        select(Allocation.resource_pool, Allocation.state, Allocation.slots).where(
            Allocation.state.in_(LIVE_ALLOCATION_STATES)
        )
    )
    for pool_name, state, slots in rows:
        name = default if (not pool_name or pool_name == "default") else str(pool_name)
        if name is None:
            continue
        running = state in _RUNNING
        counts[(name, running)] = counts.get((name, running), 0) + 1
        if running:
            used[name] = used.get(name, 0) + int(slots or 0)
    out = []
    for pool in pools:
        if pool.idle_slots is not None:
            busy = max(0, pool.slots - pool.idle_slots)  # others' jobs count too
        else:
            busy = min(pool.slots, used.get(pool.name, 0))  # sinfo shows no free GPUs
        view = PoolView(
            name=pool.name,
            description=pool.description,
            num_agents=pool.usable_nodes,
            slots_per_agent=pool.slots_per_node,
            slot_type=pool.slot_type,
            slots_available=pool.slots,
            slots_used=busy,
            queued=counts.get((pool.name, False), 0),
            scheduled=counts.get((pool.name, True), 0),
        )
        out.append(PartitionView(view, pool.name == default, pool.gpu_types, pool))
    return out


def _kind(manager: HpcManager) -> str:
    """What the batch system calls a pool: ``partition`` (Slurm), ``queue`` (PBS)."""
    return "queue" if manager.name == "PBS" else "partition"


def check_pool(manager: HpcManager, pool: str) -> None:
    """Raise InvalidArgumentError when ``pool`` is not a partition (see the module docstring)."""
    if not pool or pool == "default":
        return
    pools = manager.pools()
    if not pools or any(p.name == pool for p in pools):
        return
    names = ", ".join(sorted(p.name for p in pools))
    default = _default_partition(manager, pools)
    unset = f" (the default one is {default})" if default else ""
    kind = _kind(manager)
    raise InvalidArgumentError(
        f"resource pool {pool!r} is not a {manager.name} {kind} of this cluster; set "
        f"resources.resource_pool to one of: {names}, or leave it unset for the default "
        f"{kind}{unset}"
    )
