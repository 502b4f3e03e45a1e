"""Track many Slurm jobs: **one** ``squeue`` for all tracked jobs per poll and, only when some
jobs ended or vanished from squeue, **one** ``sacct`` for those (their exit codes).

The polling, rate limit, change detection and lost jobs are :class:`~stalwart.hpc.tracker.
JobTracker`'s (see its contract); this module only says how Slurm is asked. squeue's word wins
over accounting while the job is still live there (accounting lags); a job squeue no longer
lists is read from accounting, with the restart count squeue last showed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from stalwart.hpc.slurm.client import SlurmClient
from stalwart.hpc.states import JobStatus
from stalwart.hpc.tracker import JobTracker, JobUpdate

__all__ = ["JobUpdate", "SlurmTracker"]


class SlurmTracker(JobTracker):
    """A :class:`~stalwart.hpc.tracker.JobTracker` that asks Slurm (squeue, then sacct)."""

    system = "Slurm"

    def __init__(
        self,
        client: SlurmClient,
        *,
        min_interval: float = 2.0,
        lost_after: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(self._fetch, min_interval=min_interval, lost_after=lost_after, clock=clock)
        self.client = client

    def _fetch(self, job_ids: Sequence[str]) -> Mapping[str, tuple[JobStatus, int | None]]:
        wanted = set(job_ids)
        seen = {row.job_id: row for row in self.client.squeue() if row.job_id in wanted}
        out: dict[str, tuple[JobStatus, int | None]] = {}
        need_record: list[str] = []
        for job_id in job_ids:
            row = seen.get(job_id)
            if row is None:
                need_record.append(job_id)
                continue
            out[job_id] = (row.status, row.restarts)
            if row.status.terminal:
                need_record.append(job_id)
        records = {r.job_id: r for r in self.client.finished(need_record)} if need_record else {}
        for job_id in need_record:
            record = records.get(job_id)
            if record is None:
                continue
            if job_id in out and not record.status.terminal:
                continue  # accounting lags squeue: keep squeue's word for now
            restarts = out[job_id][1] if job_id in out else None
            out[job_id] = (record.status, restarts)
        return out
