"""Slurm: batch scripts, command formats and parsers, partitions, a client and a tracker.

Pure modules (``args``, ``script``, ``commands``, ``parse``, ``partitions``) do no I/O;
``client`` runs one command per call through a :class:`~stalwart.hpc.runner.Runner`;
``tracker`` follows many jobs with at most two commands per poll.
"""

from __future__ import annotations

from stalwart.hpc.slurm.client import Accounting, SlurmClient
from stalwart.hpc.slurm.script import SlurmOptions, render_sbatch_script
from stalwart.hpc.slurm.tracker import JobUpdate, SlurmTracker

__all__ = [
    "Accounting",
    "JobUpdate",
    "SlurmClient",
    "SlurmOptions",
    "SlurmTracker",
    "render_sbatch_script",
]
