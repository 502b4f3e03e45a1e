"""A thin Slurm client: runs the commands of :mod:`~stalwart.hpc.slurm.commands`, parses them.

Contract: every method is one command (never one per job). Methods block for at most
``timeout`` seconds. A non-zero exit raises :class:`~stalwart.hpc.errors.HpcCommandError`
(``retryable`` when slurmctld did not answer), except where a method says it tolerates one.
Output that cannot be parsed raises :class:`~stalwart.hpc.slurm.parse.SlurmParseError`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Literal

from stalwart.hpc.errors import HpcCommandError
from stalwart.hpc.layout import BatchRequest
from stalwart.hpc.runner import CommandResult, Runner, SubprocessRunner
from stalwart.hpc.slurm import commands
from stalwart.hpc.slurm.parse import (
    SacctRecord,
    SinfoNode,
    SqueueRecord,
    parse_sacct,
    parse_sbatch,
    parse_scontrol,
    parse_sinfo,
    parse_squeue,
)
from stalwart.hpc.slurm.script import SlurmOptions, render_sbatch_script

__all__ = ["Accounting", "SlurmClient", "parse_accounting"]

Accounting = Literal["slurmdbd", "jobcomp", "none"]
"""Where finished jobs are read: ``sacct`` (slurmdbd), ``sacct --completion`` (the job
completion file), or nowhere (only ``squeue``, while slurmctld remembers the job)."""

# scancel messages for jobs that are already gone: cancelling them is a success.
_GONE = re.compile(r"already completing or completed|invalid job id|job has already finished", re.I)


def parse_accounting(show_config: str) -> Accounting:
    """Which :data:`Accounting` ``scontrol show config`` output allows."""
    values = {
        key.strip(): value.strip()
        for key, sep, value in (line.partition("=") for line in show_config.splitlines())
        if sep
    }
    if values.get("AccountingStorageType", "").endswith("slurmdbd"):
        return "slurmdbd"
    if values.get("JobCompType", "none").rsplit("/", 1)[-1] not in ("none", ""):
        return "jobcomp"
    return "none"


class SlurmClient:
    """Slurm's commands as typed calls.

    ``user``: only this user's jobs are listed (None: everyone's); ``accounting``: see
    :data:`Accounting` (None: read it from ``scontrol show config`` on first use).
    """

    def __init__(
        self,
        runner: Runner | None = None,
        *,
        user: str | None = None,
        accounting: Accounting | None = None,
        options: SlurmOptions | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.runner: Runner = runner or SubprocessRunner()
        self.user = user
        self._accounting = accounting
        self.options = options or SlurmOptions()
        self.timeout = timeout

    def _run(self, argv: list[str]) -> CommandResult:
        result = self.runner(argv, timeout=self.timeout)
        if not result.ok:
            raise HpcCommandError(argv, result.returncode, result.stderr or result.stdout)
        return result

    @property
    def accounting(self) -> Accounting:
        """Where finished jobs are read (asks ``scontrol show config`` once when unknown)."""
        if self._accounting is None:
            self._accounting = parse_accounting(self._run(["scontrol", "show", "config"]).stdout)
        return self._accounting

    def write_script(self, request: BatchRequest) -> Path:
        """Render ``request``'s script into its job directory (created); returns its path.

        Raises SchedulerArgsError (before touching the filesystem) when it cannot be built.
        """
        text = render_sbatch_script(request, self.options)
        job_dir = Path(request.job_dir)
        job_dir.mkdir(parents=True, exist_ok=True)
        path = job_dir / "job.sbatch"
        path.write_text(text)
        return path

    def submit(self, request: BatchRequest) -> str:
        """Write and ``sbatch`` ``request``'s script; returns the job id.

        Slurm's refusal (an invalid partition, a limit) raises HpcCommandError carrying
        Slurm's message; it is not retryable.
        """
        path = self.write_script(request)
        return parse_sbatch(self._run(commands.sbatch_argv(str(path))).stdout)

    def cancel(self, job_ids: Collection[str]) -> None:
        """``scancel`` all of ``job_ids`` in one call; jobs that already ended are fine."""
        if not job_ids:
            return
        argv = commands.scancel_argv(job_ids)
        result = self.runner(argv, timeout=self.timeout)
        if result.ok:
            return
        lines = [ln for ln in (result.stderr + result.stdout).splitlines() if ln.strip()]
        if lines and all(_GONE.search(ln) for ln in lines):
            return
        raise HpcCommandError(argv, result.returncode, result.stderr or result.stdout)

    def squeue(self) -> list[SqueueRecord]:
        """Every job slurmctld knows (of ``user``), finished ones included while it remembers."""
        return parse_squeue(self._run(commands.squeue_argv(self.user)).stdout)

    def finished(self, job_ids: Collection[str]) -> list[SacctRecord]:
        """Records of ended jobs among ``job_ids`` from accounting, in one call ([] without)."""
        if not job_ids or self.accounting == "none":
            return []
        argv = commands.sacct_argv(job_ids, completion=self.accounting == "jobcomp")
        return parse_sacct(self._run(argv).stdout)

    def sinfo(self) -> list[SinfoNode]:
        """Nodes per partition."""
        return parse_sinfo(self._run(commands.sinfo_argv()).stdout)

    def show_job(self, job_id: str) -> dict[str, str] | None:
        """``scontrol show job``'s fields for one job; None when slurmctld forgot it."""
        argv = commands.scontrol_show_job_argv(job_id)
        result = self.runner(argv, timeout=self.timeout)
        if not result.ok:
            if _GONE.search(result.stderr):
                return None
            raise HpcCommandError(argv, result.returncode, result.stderr)
        jobs = parse_scontrol(result.stdout)
        return jobs[0] if jobs else None
