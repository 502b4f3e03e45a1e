"""HPC workload managers (Slurm, PBS): the pure pieces the master's resource manager builds on.

- :mod:`~stalwart.hpc.layout`: an allocation's request (:class:`BatchRequest`) and how its slots
  become nodes and devices;
- :mod:`~stalwart.hpc.states`: batch-job states -> allocation states, with readable reasons;
- :mod:`~stalwart.hpc.slurm`: sbatch scripts and argument checks, command formats, parsers,
  partitions -> resource pools, a thin client and a tracker that polls all jobs at once;
- :mod:`~stalwart.hpc.pbs`: the same for PBS (qsub/qstat/qdel): scripts, parsers, a client and
  a tracker (one qstat per poll);
- :mod:`~stalwart.hpc.tracker`: what both trackers share (rate limit, changes, lost jobs);
- :mod:`~stalwart.hpc.containers`: how the task runs in apptainer/singularity, podman or enroot;
- :mod:`~stalwart.hpc.runner`: the one place that runs commands (and a replaying fake).

Nothing here touches the database or the master's state: the master's cluster loop calls these.
"""

from __future__ import annotations

from stalwart.hpc.errors import HpcCommandError, SchedulerArgsError
from stalwart.hpc.layout import BatchRequest, Layout, SlotType, plan_layout
from stalwart.hpc.states import JobStatus, Outcome

__all__ = [
    "BatchRequest",
    "HpcCommandError",
    "JobStatus",
    "Layout",
    "Outcome",
    "SchedulerArgsError",
    "SlotType",
    "plan_layout",
]
