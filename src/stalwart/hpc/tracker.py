"""Track many batch jobs (Slurm, PBS) with a bounded number of commands per poll.

Contract:

- :meth:`JobTracker.poll` calls ``fetch(job ids)`` **once** for all tracked jobs; ``fetch`` is
  a fixed number of commands whatever the number of jobs (Slurm: one ``squeue`` and at most one
  ``sacct``; PBS: one ``qstat -x -f -F json``). Calls closer together than ``min_interval``
  seconds return ``[]`` without running anything, so a busy caller cannot hammer the batch
  system.
- ``fetch`` answers ``{job id: (status, restarts)}`` for the jobs it knows (``restarts`` None:
  unknown, the last known count is kept). It returns one :class:`JobUpdate` per tracked job whose
  status changed (state, reason, outcome or restart count). A job's terminal update is returned
  once; the job is then no longer tracked.
- A job that ``fetch`` does not know for ``lost_after`` consecutive polls ends as ``LOST`` (a
  node-failure-like outcome), so a purged job never hangs an allocation forever.
- A failing command raises :class:`~stalwart.hpc.errors.HpcCommandError` and changes nothing;
  poll again later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from stalwart.hpc.states import JobStatus, Outcome

__all__ = ["Fetch", "JobTracker", "JobUpdate"]

Fetch = Callable[[Sequence[str]], Mapping[str, tuple[JobStatus, int | None]]]
"""What a tracker asks the batch system: the status and restart count of the jobs it knows."""


@dataclass(frozen=True)
class JobUpdate:
    """A tracked job's new status. ``restarts``: times the batch system requeued it (0 for the
    first run)."""

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


def lost_status(system: str = "the batch system") -> JobStatus:
    """The status of a job nobody knows any more."""
    return JobStatus(
        "UNKNOWN",
        "TERMINATED",
        f"{system} no longer knows this job and has no record of how it ended",
        outcome=Outcome.NODE_FAILED,
        infrastructure=True,
    )


class JobTracker:
    """Follows jobs by id; ``key`` is the caller's name for each (an allocation id)."""

    system = "the batch system"
    """How messages name the batch system."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        min_interval: float = 2.0,
        lost_after: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fetch = fetch
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
        known = self.fetch(list(self._jobs))
        statuses: dict[str, tuple[JobStatus, int]] = {}
        for job_id, tracked in self._jobs.items():
            found = known.get(job_id)
            if found is not None:
                status, restarts = found
                statuses[job_id] = (status, tracked.restarts if restarts is None else restarts)
                continue
            tracked.misses += 1
            if tracked.misses >= self.lost_after:
                statuses[job_id] = (lost_status(self.system), tracked.restarts)
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
