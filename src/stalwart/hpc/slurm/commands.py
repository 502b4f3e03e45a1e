"""The Slurm command lines Stalwart runs, with the output formats its parsers read.

Contract: pure argv builders; nothing runs here. Each format is fixed: the parsers in
:mod:`stalwart.hpc.slurm.parse` read exactly these columns, and the fixtures in
``tests/slurm/fixtures`` were captured with them (``scripts/slurm/capture_fixtures.py``).
Formats are Slurm's text formats rather than ``--json``, whose schema changes with every Slurm
release (``v0.0.38`` in 22.05, ``v0.0.39`` in 23.02...); the text columns are stable.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "SACCT_FIELDS",
    "SINFO_FIELDS",
    "SQUEUE_FIELDS",
    "sacct_argv",
    "sbatch_argv",
    "scancel_argv",
    "scontrol_show_job_argv",
    "sinfo_argv",
    "squeue_argv",
]

SQUEUE_FIELDS = (
    "JobID",
    "State",
    "Reason",
    "RestartCnt",
    "Partition",
    "NumNodes",
    "NodeList",
    "SubmitTime",
    "StartTime",
    "TimeLimit",
    "Name",
)
"""squeue ``--Format`` columns, ``|``-separated; ``Name`` last so a ``|`` in it stays there."""

SACCT_FIELDS = (
    "JobID",
    "State",
    "ExitCode",
    "Partition",
    "NNodes",
    "NodeList",
    "Start",
    "End",
    "Elapsed",
    "JobName",
)
"""sacct ``--format`` columns (``--parsable2``: ``|``-separated); all exist in the job completion
file too, so ``sacct --completion`` (no slurmdbd) reads the same."""

SINFO_FIELDS = ("%N", "%P", "%c", "%m", "%G", "%T", "%l", "%C")
"""sinfo ``--Node --format`` columns: node, partition (``*`` marks the default), CPUs, memory
(MB), GRES, state, partition time limit, CPUs allocated/idle/other/total."""


def squeue_argv(user: str | None = None) -> list[str]:
    """All jobs (``--states=all``, finished ones while slurmctld remembers them) of ``user``."""
    fmt = ",".join(f"{name}:|" for name in SQUEUE_FIELDS[:-1]) + f",{SQUEUE_FIELDS[-1]}:"
    argv = ["squeue", "--noheader", "--states=all", f"--Format={fmt}"]
    if user:
        argv.append(f"--user={user}")
    return argv


def sacct_argv(job_ids: Iterable[str], *, completion: bool) -> list[str]:
    """The records of ``job_ids`` (allocations only, no steps) in one call.

    ``completion``: read the job completion plugin (``JobCompType=jobcomp/filetxt``) instead of
    slurmdbd accounting (``sacct --completion``), for clusters without slurmdbd.
    """
    ids = ",".join(sorted(set(job_ids), key=_job_sort_key))
    argv = ["sacct", "--noheader", "--parsable2", "--allocations"]
    if completion:
        argv.append("--completion")
    argv += [f"--format={','.join(SACCT_FIELDS)}", f"--jobs={ids}"]
    return argv


def sinfo_argv() -> list[str]:
    """One line per node and partition."""
    return ["sinfo", "--noheader", "--Node", f"--format={'|'.join(SINFO_FIELDS)}"]


def sbatch_argv(script_path: str) -> list[str]:
    """Submit a script; ``--parsable`` prints ``<job id>[;<cluster>]``."""
    return ["sbatch", "--parsable", script_path]


def scancel_argv(job_ids: Iterable[str], *, signal: str | None = None) -> list[str]:
    """Cancel (or, with ``signal``, only signal) every job in ``job_ids`` in one call."""
    argv = ["scancel"]
    if signal:
        argv.append(f"--signal={signal}")
    return [*argv, *sorted(set(job_ids), key=_job_sort_key)]


def scontrol_show_job_argv(job_id: str | None = None) -> list[str]:
    """One job (or every job slurmctld remembers), one line per job."""
    argv = ["scontrol", "--oneliner", "show", "job"]
    return [*argv, job_id] if job_id else argv


def _job_sort_key(job_id: str) -> tuple[int, str]:
    head = job_id.split("_", 1)[0].split(".", 1)[0]
    return (int(head) if head.isdigit() else -1, job_id)
