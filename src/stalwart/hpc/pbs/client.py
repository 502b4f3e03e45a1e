"""A thin PBS (OpenPBS / PBS Pro) client and its tracker, mirroring :mod:`stalwart.hpc.slurm`.

Contract: every method is one command (never one per job); methods block for at most
``timeout`` seconds; a non-zero exit raises :class:`~stalwart.hpc.errors.HpcCommandError`
(``retryable`` when the server did not answer) except where a method says it tolerates one.

- :meth:`PbsClient.submit` writes ``job.pbs`` into the job directory and ``qsub``\\ s it.
- :meth:`PbsClient.cancel`: one ``qdel`` for many jobs; jobs that already ended are fine.
- :meth:`PbsClient.qstat`: one ``qstat -x -f -F json <ids>`` (finished jobs included, which is
  where PBS keeps exit statuses: the server needs ``job_history_enable``). qstat exits non-zero
  when some ids are unknown (purged) but still prints the others: those are returned.
- :meth:`PbsClient.jobs`: every live job (``qstat -f -F json``), to find a job by name.
- :meth:`PbsClient.queues` (``qstat -Q -f -F json``), :meth:`PbsClient.nodes`
  (``pbsnodes -a -F json``, GPUs counted with ``options.gpu_resource``) and
  :meth:`PbsClient.default_queue` (``qstat -B -f -F json``): what the resource pools are made
  of (:func:`~stalwart.hpc.pbs.queues.queues_to_pools`). Output that does not parse raises
  HpcCommandError too (not retryable).

:class:`PbsTracker` is a :class:`~stalwart.hpc.tracker.JobTracker` whose one command per poll
is :meth:`PbsClient.qstat`; restarts are ``run_count - 1``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from stalwart.hpc.errors import HpcCommandError
from stalwart.hpc.layout import BatchRequest
from stalwart.hpc.pbs.parse import (
    PbsJob,
    PbsNode,
    PbsParseError,
    PbsQueue,
    parse_pbsnodes_json,
    parse_qstat_json,
    parse_qstat_queues_json,
    parse_qstat_server_json,
    parse_qsub,
    pbsnodes_argv,
    qdel_argv,
    qstat_argv,
    qstat_queues_argv,
    qstat_server_argv,
    qsub_argv,
)
from stalwart.hpc.pbs.script import PbsOptions, render_qsub_script
from stalwart.hpc.runner import CommandResult, Runner, SubprocessRunner
from stalwart.hpc.states import JobStatus
from stalwart.hpc.tracker import JobTracker

__all__ = ["SCRIPT_NAME", "PbsClient", "PbsTracker", "live_qstat_argv"]

_T = TypeVar("_T")

SCRIPT_NAME = "job.pbs"
"""The batch script's name in the job directory."""

# qdel/qstat messages for jobs that are gone or finished: not a failure of a whole call.
_GONE = re.compile(
    r"unknown job id|job has finished|request invalid for state of job|job .* finished",
    re.I,
)

_NO_NODES = re.compile(r"server has no node list", re.I)


def live_qstat_argv() -> list[str]:
    """Every live job, as JSON (no ``-x``: history can be long)."""
    return ["qstat", "-f", "-F", "json"]


class PbsClient:
    """PBS's commands as typed calls (see the module docstring)."""

    def __init__(
        self,
        runner: Runner | None = None,
        *,
        options: PbsOptions | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.runner: Runner = runner or SubprocessRunner()
        self.options = options or PbsOptions()
        self.timeout = timeout

    def _run(self, argv: list[str]) -> CommandResult:
        result = self.runner(argv, timeout=self.timeout)
        if not result.ok:
            raise HpcCommandError(argv, result.returncode, result.stderr or result.stdout)
        return result

    def write_script(self, request: BatchRequest) -> Path:
        """Render ``request``'s script into its job directory (created); returns its path.

        Raises SchedulerArgsError (before touching the filesystem) when it cannot be built."""
        text = render_qsub_script(request, self.options)
        job_dir = Path(request.job_dir)
        job_dir.mkdir(parents=True, exist_ok=True)
        path = job_dir / SCRIPT_NAME
        path.write_text(text)
        return path

    def submit(self, request: BatchRequest) -> str:
        """Write and ``qsub`` ``request``'s script; the job id (``101.server``). PBS's refusal
        raises HpcCommandError carrying its message (not retryable)."""
        path = self.write_script(request)
        return parse_qsub(self._run(qsub_argv(str(path))).stdout)

    def cancel(self, job_ids: Collection[str]) -> None:
        """``qdel`` all of ``job_ids`` in one call; jobs that already ended are fine."""
        if not job_ids:
            return
        argv = qdel_argv(sorted(job_ids))
        result = self.runner(argv, timeout=self.timeout)
        if result.ok:
            return
        lines = [ln for ln in (result.stderr + result.stdout).splitlines() if ln.strip()]
        if lines and all(_GONE.search(ln) for ln in lines):
            return
        raise HpcCommandError(argv, result.returncode, result.stderr or result.stdout)

    def qstat(self, job_ids: Collection[str]) -> list[PbsJob]:
        """Full records of ``job_ids`` (finished ones included), in one call."""
        if not job_ids:
            return []
        argv = qstat_argv(sorted(job_ids))
        result = self.runner(argv, timeout=self.timeout)
        if not result.ok:
            lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
            if not (lines and all(_GONE.search(ln) for ln in lines)):
                raise HpcCommandError(argv, result.returncode, result.stderr or result.stdout)
        if not result.stdout.strip():
            return []
        return parse_qstat_json(result.stdout)

    def jobs(self) -> list[PbsJob]:
        """Every live job the server lists (all users')."""
        output = self._run(live_qstat_argv()).stdout
        return parse_qstat_json(output) if output.strip() else []

    def _parsed(self, argv: list[str], parse: Callable[[str], _T], empty: _T) -> _T:
        output = self._run(argv).stdout
        if not output.strip():
            return empty
        try:
            return parse(output)
        except PbsParseError as exc:
            raise HpcCommandError(argv, 0, f"unreadable output: {exc}") from None

    def queues(self) -> list[PbsQueue]:
        """Every queue (``qstat -Q -f -F json``), in the server's order."""
        return self._parsed(qstat_queues_argv(), parse_qstat_queues_json, [])

    def nodes(self) -> list[PbsNode]:
        """Every node (``pbsnodes -a -F json``); GPUs are ``options.gpu_resource``. A server
        without nodes (pbsnodes fails with "Server has no node list") has none."""
        argv = pbsnodes_argv()
        result = self.runner(argv, timeout=self.timeout)
        if not result.ok:
            if _NO_NODES.search(result.stderr + result.stdout):
                return []
            raise HpcCommandError(argv, result.returncode, result.stderr or result.stdout)
        if not result.stdout.strip():
            return []
        try:
            return parse_pbsnodes_json(result.stdout, self.options.gpu_resource)
        except PbsParseError as exc:
            raise HpcCommandError(argv, 0, f"unreadable output: {exc}") from None

    def default_queue(self) -> str | None:
        """The server's ``default_queue`` (``qstat -B -f -F json``); None when unset."""
        return self._parsed(qstat_server_argv(), parse_qstat_server_json, None)


class PbsTracker(JobTracker):
    """A :class:`~stalwart.hpc.tracker.JobTracker` that asks PBS (one qstat per poll)."""

    system = "PBS"

    def __init__(
        self,
        client: PbsClient,
        *,
        min_interval: float = 2.0,
        lost_after: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(self._fetch, min_interval=min_interval, lost_after=lost_after, clock=clock)
        self.client = client

    def _fetch(self, job_ids: Sequence[str]) -> Mapping[str, tuple[JobStatus, int | None]]:
        try:
            jobs = self.client.qstat(job_ids)
        except PbsParseError as exc:
            raise HpcCommandError(
                qstat_argv(job_ids), 0, f"unreadable qstat output: {exc}"
            ) from None
        return {job.job_id: (job.status, max(0, job.run_count - 1)) for job in jobs}
