"""PBS (OpenPBS / PBS Pro): qsub scripts, ``pbsbatch_args`` checks, qstat parsers, job states,
and a client and tracker mirroring :mod:`stalwart.hpc.slurm` (:mod:`.client`: one
``qstat -x -f -F json`` per poll covers every job).

Tested through script generation, parsers and a fake server (hand-written sample outputs):
there is no PBS in CI.
"""

from __future__ import annotations

from stalwart.hpc.pbs.parse import PbsJob, parse_qstat_full, parse_qstat_json, pbs_job_status
from stalwart.hpc.pbs.script import PbsOptions, pbs_directives, render_qsub_script

__all__ = [
    "PbsJob",
    "PbsOptions",
    "parse_qstat_full",
    "parse_qstat_json",
    "pbs_directives",
    "pbs_job_status",
    "render_qsub_script",
]
