"""PBS queues become Stalwart resource pools (PBS's counterpart of
:mod:`stalwart.hpc.slurm.partitions`).

Contract: :func:`queues_to_pools` is pure. One :class:`~stalwart.hpc.slurm.partitions.
PartitionPool` per queue, in ``qstat -Q``'s order, except:

- **disabled** queues (``enabled = False``: ``qsub`` refuses them) and **routing** queues
  (``queue_type = Route``: they run nothing themselves, they pass jobs on to execution queues)
  are **left out**, so an experiment naming one is refused at create like any unknown pool;
- **stopped** queues (``enabled``, ``started = False``: ``qsub`` accepts jobs, which wait until
  an operator starts the queue) are **kept but unusable**: ``usable_nodes``, ``slots`` and
  ``idle_slots`` are 0 and the description says so; ``slots_per_node`` still describes their
  nodes, so jobs are shaped as they will run.

Which nodes serve a queue, as PBS decides it: a node with a ``queue`` attribute serves that
queue only, and a queue some node names that way (``hasnodes``) is served by those nodes only;
otherwise a queue whose ``default_chunk.Qlist`` is set is served by the nodes listing that value
in ``resources_available.Qlist``, and any other queue by every node without a ``queue``
attribute (``Qlist`` restricts which queues' chunks a node matches, it does not bind the node).

Each pool has:

- ``slot_type``: the queue's ``partition_overrides`` entry, else the cluster-wide ``slot_type``,
  else ``cuda`` when any of its nodes has GPUs (the ``gpu_resource``, ``ngpus`` by default),
  else ``cpu`` (PBS has no standard GPU type attribute: ``rocm`` only through those settings);
- ``nodes``: the nodes serving it; ``usable_nodes``: those that can take jobs (none of ``down``,
  ``offline``, ``stale``, ``state-unknown``, ``unresolvable``, ``maintenance``, ``provisioning``,
  ``wait-provisioning``, ``initializing`` in their state: ``free``, ``job-busy``,
  ``job-exclusive``, ``resv-exclusive``, ``busy`` and ``sleep`` count);
- ``slots``: GPUs (GPU pools) or CPUs (CPU pools) of the usable nodes; ``slots_per_node`` the
  most on one of them;
- ``idle_slots``: those not assigned to jobs (``resources_available - resources_assigned``) on
  the usable nodes, 0 on nodes that are ``job-exclusive``, ``resv-exclusive`` or ``busy``.
  Unlike sinfo, pbsnodes shows assigned GPUs, so GPU pools have idle slots too;
- ``default``: the queue is ``default_queue`` (the caller's: the server's, or
  ``default_partition``); ``time_limit``: ``resources_max.walltime``, else ``infinite``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stalwart.hpc.layout import SlotType
from stalwart.hpc.pbs.parse import PbsNode, PbsQueue
from stalwart.hpc.slurm.partitions import PartitionOverride, PartitionPool

__all__ = ["UNUSABLE_STATES", "node_serves", "node_usable", "queues_to_pools"]

UNUSABLE_STATES = frozenset(
    {
        "down",
        "offline",
        "stale",
        "state-unknown",
        "unknown",
        "unresolvable",
        "maintenance",
        "provisioning",
        "wait-provisioning",
        "initializing",
    }
)
"""Node states (any of them) that keep a node from taking jobs."""

_FULL = frozenset({"job-exclusive", "resv-exclusive", "busy"})
"""Node states in which nothing more starts on the node."""


def node_usable(node: PbsNode) -> bool:
    """The node can take jobs (see the module docstring)."""
    return bool(node.states) and not any(s in UNUSABLE_STATES for s in node.states)


def node_serves(node: PbsNode, queue: PbsQueue, bound: Iterable[str] = ()) -> bool:
    """Whether PBS runs ``queue``'s jobs on ``node``; ``bound``: the queues some node names in
    its ``queue`` attribute (see the module docstring)."""
    if node.queue:
        return node.queue == queue.name
    if queue.name in set(bound):
        return False
    if queue.qlist:
        return queue.qlist in node.qlist
    return True


def _idle(node: PbsNode, kind: SlotType) -> int:
    if any(s in _FULL for s in node.states):
        return 0
    if kind == "cpu":
        return max(0, node.cpus - node.cpus_assigned)
    return max(0, node.gpus - node.gpus_assigned)


def queues_to_pools(
    queues: Iterable[PbsQueue],
    nodes: Iterable[PbsNode],
    *,
    default_queue: str | None = None,
    overrides: Mapping[str, PartitionOverride] | None = None,
    slot_type: SlotType | None = None,
) -> list[PartitionPool]:
    """The usable queues as pools (see the module docstring)."""
    overrides = overrides or {}
    all_nodes = list(nodes)
    bound = {n.queue for n in all_nodes if n.queue}
    pools = []
    for queue in queues:
        if not queue.enabled or not queue.execution:
            continue
        members = [n for n in all_nodes if node_serves(n, queue, bound)]
        override = overrides.get(queue.name, PartitionOverride())
        kind: SlotType = (
            override.slot_type
            or slot_type
            or ("cuda" if any(n.gpus > 0 for n in members) else "cpu")
        )
        usable = [n for n in members if node_usable(n)]
        per_node = [n.gpus if kind != "cpu" else n.cpus for n in usable]
        what = f"{kind} slots" if kind == "cpu" else f"{kind} GPUs"
        if queue.walltime_max:
            what += f", walltime at most {queue.walltime_max}"
        if not queue.started:
            what += " (stopped: jobs wait until it is started)"
        pools.append(
            PartitionPool(
                name=queue.name,
                default=queue.name == default_queue,
                slot_type=kind,
                nodes=len(members),
                usable_nodes=len(usable) if queue.started else 0,
                slots=sum(per_node) if queue.started else 0,
                slots_per_node=max(per_node, default=0),
                idle_slots=sum(_idle(n, kind) for n in usable) if queue.started else 0,
                cpus_per_node=max((n.cpus for n in members), default=0),
                memory_mb_per_node=max((n.memory_mb for n in members), default=0),
                gpu_types=(),
                time_limit=queue.walltime_max or "infinite",
                description=override.description or f"PBS queue {queue.name}: {what}",
            )
        )
    return pools
