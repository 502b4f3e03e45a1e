"""PBS (OpenPBS / PBS Pro): qsub scripts, ``pbsbatch_args`` checks, qstat parsers, job states,
a client and tracker mirroring :mod:`stalwart.hpc.slurm` (:mod:`.client`: one
``qstat -x -f -F json`` per poll covers every job), and queues as resource pools
(:mod:`.queues`, from ``qstat -Q -f -F json`` and ``pbsnodes -a -F json``).

Tested through script generation, parsers and a fake server (hand-written sample outputs):
there is no PBS in CI.
"""

from __future__ import annotations

from stalwart.hpc.pbs.parse import (
    PbsJob,
    PbsNode,
    PbsQueue,
    parse_pbsnodes_json,
    parse_qstat_full,
    parse_qstat_json,
    parse_qstat_queues_json,
    pbs_job_status,
)
from stalwart.hpc.pbs.queues import queues_to_pools
from stalwart.hpc.pbs.script import PbsOptions, pbs_directives, render_qsub_script

__all__ = [
    "PbsJob",
    "PbsNode",
    "PbsOptions",
    "PbsQueue",
    "parse_pbsnodes_json",
    "parse_qstat_full",
    "parse_qstat_json",
    "parse_qstat_queues_json",
    "pbs_directives",
    "pbs_job_status",
    "queues_to_pools",
    "render_qsub_script",
]
