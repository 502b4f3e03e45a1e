"""Track many Slurm jobs with a bounded number of commands per poll.

Contract:

- :meth:`SlurmTracker.poll` runs **one** ``squeue`` for all tracked jobs and, only when some
  jobs ended or vanished from squeue, **one** ``sacct`` for those (their exit codes). The number
  of commands never depends on the number of jobs. Calls closer together than
  ``min_interval`` seconds return ``[]`` without running anything, so a busy caller cannot make
  the tracker hammer slurmctld.
- It returns one :class:`JobUpdate` per tracked job whose status changed (state, reason or
  restart count). A job's terminal update is returned once; the job is then no longer tracked.
- A job that neither squeue nor accounting knows for ``lost_after`` consecutive polls ends as
  ``LOST`` (a node-failure-like outcome), so a purged job never hangs an allocation forever.
- A failing command raises :class:`~stalwart.hpc.errors.HpcCommandError` and changes nothing;
  poll again later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from stalwart.hpc.slurm.client import SlurmClient
from stalwart.hpc.states import JobStatus, Outcome

__all__ = ["JobUpdate", "SlurmTracker"]


@dataclass(frozen=True)
class JobUpdate:
    """A tracked job's new status. ``restarts``: times Slurm requeued it (0 for the first run)."""

    job_id: str
    key: str
    status: JobStatus
    restarts: int
    previous: JobStatus | None


@dataclass
class _Tracked:
    key: str
    status: JobStatus | None = None
    restarts: int = 0
    misses: int = 0


def _lost() -> JobStatus:
    return JobStatus(
        "UNKNOWN",
        "TERMINATED",
        "Slurm no longer knows this job and has no record of how it ended",
        outcome=Outcome.NODE_FAILED,
        infrastructure=True,
    )


class SlurmTracker:
    """Follows jobs by id; ``key`` is the caller's name for each (an allocation id)."""

    def __init__(
        self,
        client: SlurmClient,
        *,
        min_interval: float = 2.0,
        lost_after: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.min_interval = min_interval
        self.lost_after = lost_after
        self.clock = clock
        self._jobs: dict[str, _Tracked] = {}
        self._last_poll: float | None = None

    def track(self, job_id: str, key: str) -> None:
        """Follow ``job_id`` (idempotent); its first poll reports its status."""
        self._jobs.setdefault(job_id, _Tracked(key))

    def forget(self, job_id: str) -> None:
        """Stop following ``job_id`` (unknown ids are fine)."""
        self._jobs.pop(job_id, None)

    @property
    def job_ids(self) -> list[str]:
        """The jobs followed now."""
        return list(self._jobs)

    def poll(self, *, force: bool = False) -> list[JobUpdate]:
        """Statuses that changed since the last poll (see the module docstring)."""
        now = self.clock()
        if not force and self._last_poll is not None and now - self._last_poll < self.min_interval:
            return []
        if not self._jobs:
            return []
        self._last_poll = now
        seen = {row.job_id: row for row in self.client.squeue() if row.job_id in self._jobs}

        statuses: dict[str, tuple[JobStatus, int]] = {}
        need_record: list[str] = []
        for job_id in self._jobs:
            row = seen.get(job_id)
            if row is None:
                need_record.append(job_id)
                continue
            status = row.status
            statuses[job_id] = (status, row.restarts)
            if status.terminal:
                need_record.append(job_id)

        records = {r.job_id: r for r in self.client.finished(need_record)} if need_record else {}
        for job_id in need_record:
            record = records.get(job_id)
            tracked = self._jobs[job_id]
            if record is not None:
                restarts = statuses[job_id][1] if job_id in statuses else tracked.restarts
                status = record.status
                if job_id in statuses and not status.terminal:
                    continue  # accounting lags squeue: keep squeue's word for now
                statuses[job_id] = (status, restarts)
            elif job_id not in statuses:
                tracked.misses += 1
                if tracked.misses >= self.lost_after:
                    statuses[job_id] = (_lost(), tracked.restarts)
        return list(self._changes(statuses))

    def _changes(self, statuses: dict[str, tuple[JobStatus, int]]) -> Iterable[JobUpdate]:
        for job_id, (status, restarts) in statuses.items():
            tracked = self._jobs[job_id]
            if status.native_state != "UNKNOWN":
                tracked.misses = 0
            if status.allocation_state is None:
                continue  # a state this code does not know: keep what we had
            previous = tracked.status
            changed = (
                previous is None
                or (previous.allocation_state, previous.reason, previous.outcome)
                != (status.allocation_state, status.reason, status.outcome)
                or restarts != tracked.restarts
            )
            tracked.status, tracked.restarts = status, restarts
            if changed:
                yield JobUpdate(job_id, tracked.key, status, restarts, previous)
            if status.terminal:
                del self._jobs[job_id]
