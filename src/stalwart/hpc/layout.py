"""How an allocation's slots become nodes, tasks and devices on a batch system.

Contract: :func:`plan_layout` is pure. One launcher runs per node (``ntasks-per-node=1``); the
launcher starts the node's workers. ``nodes = ceil(slots / slots_per_node)``, or one node when
``slots_per_node`` is unset. When the slots do not split evenly over the nodes
(``slots_per_trial: 6, slots_per_node: 4``), GPUs are requested as a total for the job
(``total_gpus``, Slurm's TRES ``--gpus``) where the batch system can do that; otherwise each node
gets ``ceil(slots / nodes)``. Errors are :class:`~stalwart.hpc.errors.SchedulerArgsError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from pathlib import PurePosixPath
from typing import Literal

from stalwart.hpc.errors import SchedulerArgsError

__all__ = ["BatchRequest", "Layout", "SlotType", "plan_layout"]

SlotType = Literal["cpu", "cuda", "rocm"]


@dataclass(frozen=True)
class BatchRequest:
    """Everything needed to write one allocation's batch script (Slurm or PBS).

    - ``allocation_id`` names the job (``job_name``) and its directory under
      ``job_storage_root``; it must be safe in a path (letters, digits, ``.-_``).
    - ``slots``/``slot_type``: the allocation's slots; ``slots_per_node`` from the experiment's
      ``slurm:``/``pbs:`` section (None: one node).
    - ``partition``: the resource pool's partition (PBS: queue); None uses the default one.
    - ``command``: the argv the launcher runs on each node (no shell; quoted for you).
    - ``env``: variables exported before the launcher starts (the task contract).
    - ``requeue``: whether the batch system may requeue the job after preemption or a node
      failure (trials: yes, they resume from their latest checkpoint; commands: no).
    - ``scheduler_args``: the experiment's ``sbatch_args``/``pbsbatch_args`` (task container
      defaults first), validated and appended as directives.
    - ``single_node``: commands, shells and notebooks must fit on one node.
    - ``preemption_warning``: ask the batch system to send SIGTERM this long before the time
      limit, so the task checkpoints and exits (None: no warning).
    - ``exclude_nodes``: nodes the job must not run on (a trial's ``exclude_node`` log
      policies; Slurm's ``--exclude``, not honoured by PBS).
    """

    allocation_id: str
    slots: int
    slot_type: SlotType
    command: tuple[str, ...]
    job_storage_root: PurePosixPath
    partition: str | None = None
    slots_per_node: int | None = None
    gpu_type: str | None = None
    time_limit: timedelta | None = None
    env: tuple[tuple[str, str], ...] = ()
    requeue: bool = True
    scheduler_args: tuple[str, ...] = ()
    single_node: bool = False
    preemption_warning: timedelta | None = None
    job_name_prefix: str = "stalwart-"
    exclude_nodes: tuple[str, ...] = ()

    @property
    def job_name(self) -> str:
        """The batch job's name: ``job_name_prefix`` + ``allocation_id``."""
        return self.job_name_prefix + self.allocation_id

    @property
    def job_dir(self) -> PurePosixPath:
        """The allocation's directory on the shared filesystem (scripts, logs, node dirs)."""
        return self.job_storage_root / self.allocation_id


@dataclass(frozen=True)
class Layout:
    """Nodes and devices for one allocation.

    ``slots_per_node`` is what each node gets (``ceil(slots / nodes)``); ``total_gpus`` is set
    instead when GPUs should be requested for the job as a whole (uneven split).
    """

    nodes: int
    slots_per_node: int
    gpus_per_node: int
    cpus_per_node: int
    total_gpus: int | None = None


_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def plan_layout(request: BatchRequest, *, total_gpus_supported: bool = True) -> Layout:
    """Split ``request``'s slots over nodes; raise SchedulerArgsError when it cannot.

    ``total_gpus_supported``: the batch system can request a job-wide GPU count (Slurm with
    ``select/cons_tres``); without it an uneven split requests ``ceil`` GPUs on every node.
    """
    problems: list[str] = []
    if not request.allocation_id or not set(request.allocation_id) <= _SAFE:
        problems.append(
            f"allocation id {request.allocation_id!r} must be letters, digits, '.', '-', '_'"
        )
    if request.slots < 0:
        problems.append(f"slots must be >= 0, not {request.slots}")
    if request.slots_per_node is not None and request.slots_per_node < 1:
        problems.append(f"slots_per_node must be >= 1, not {request.slots_per_node}")
    if not request.command:
        problems.append("the command to run is empty")
    if problems:
        raise SchedulerArgsError(f"allocation {request.allocation_id}", problems)

    slots = request.slots
    spn = request.slots_per_node
    nodes = max(1, math.ceil(slots / spn)) if spn else 1
    if request.single_node and nodes > 1:
        raise SchedulerArgsError(
            f"allocation {request.allocation_id}",
            [
                f"{slots} slots need {nodes} nodes of {spn} slots, but this task runs on one "
                "node; lower the slots or raise slots_per_node"
            ],
        )
    per_node = math.ceil(slots / nodes) if slots else 0
    uneven = slots % nodes != 0
    gpu = request.slot_type != "cpu"
    total = slots if gpu and uneven and total_gpus_supported else None
    return Layout(
        nodes=nodes,
        slots_per_node=per_node,
        gpus_per_node=per_node if gpu and total is None else 0,
        cpus_per_node=0 if gpu else per_node,
        total_gpus=total,
    )
