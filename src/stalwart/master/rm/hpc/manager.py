"""The batch resource manager: the :class:`~stalwart.master.rm.base.ResourceManager` when
``resource_manager.type`` is ``slurm`` (:class:`SlurmManager`) or ``pbs`` (:class:`PbsManager`).
Both are one :class:`HpcManager` driving a :class:`~stalwart.master.rm.hpc.systems.BatchSystem`;
the text below speaks of Slurm's commands (PBS: ``qsub``, ``qdel``, one ``qstat -x -f -F json``
per poll).

The loop calls two methods each round, without the state lock: every Slurm command runs with no
lock and no transaction held, and what it answers is applied in a short step under the lock
(database rows are the truth; what is kept here is rebuilt from them after a restart,
:meth:`HpcManager.reattach`):

- :meth:`SlurmManager.sync` (before the loop ends allocations): cancels, with **one**
  ``scancel``, the jobs of allocations being killed (TERMINATING, or asked to stop while still
  queued in Slurm); polls Slurm through the tracker (**one** ``squeue`` and at most **one**
  ``sacct`` for all jobs, at most every ``poll_interval`` seconds); records what it learns on the
  container rows (RUNNING; EXITED with Slurm's exit code and a readable reason; a job Slurm
  PREEMPTED for a higher-priority partition exits 0 with the allocation's preemption
  acknowledged, so its trial resumes from its latest checkpoint without using a restart; an
  interactive task's job ends with Slurm's reason instead); and
  ends the allocations whose job was rejected (their trials error at once). It returns those
  trial exits for the searchers; the other ends go through the loop's usual step, as on agents.
- :meth:`SlurmManager.schedule`: claims each PENDING allocation
  (:func:`~stalwart.master.rm.hpc.jobs.claim_batch`, committed), writes its token file (0600) and
  ``sbatch``\\ es it outside any transaction, then records the job id, or the rejection (argument
  checks of :mod:`stalwart.hpc`, or Slurm's own message). A transient failure (slurmctld busy)
  leaves the allocation claimed and unsubmitted: it is submitted again next round, after
  checking squeue for a job of that name (a master that stopped between ``sbatch`` and the
  commit of the job id adopts the job instead of submitting it twice).

A queued job that Slurm says will not start by itself (:attr:`~stalwart.hpc.states.JobStatus.
stuck`: PartitionNodeLimit, BadConstraints, ReqNodeNotAvail, held...) is reported in its trial's
logs at once; after ``stuck_job_timeout`` seconds in that state (counted from when this master
first saw it) it is cancelled with one ``scancel`` and its trial errors (no restart: a new job
would be stuck as well), Slurm's reason in the logs.

Resource pools come from ``sinfo`` (:meth:`SlurmManager.pools`): one per partition
(:func:`~stalwart.hpc.slurm.partitions.partitions_to_pools`, with ``partition_overrides``),
read before the first submission and again at most every :data:`POOLS_REFRESH_S` seconds (one
``sinfo``; a failure keeps the last answer). Their slot types (GRES) decide what each job asks
for when neither an override nor the master's ``slot_type`` does. Under PBS they are the queues
(:func:`~stalwart.hpc.pbs.queues.queues_to_pools`: ``qstat -Q`` and ``pbsnodes``, plus
``qstat -B`` for the default queue when ``default_partition`` is unset), read the same way.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from stalwart.environments.prepull import PrepullSettings
from stalwart.hpc.errors import HpcCommandError, SchedulerArgsError
from stalwart.hpc.layout import SlotType
from stalwart.hpc.pbs.client import PbsClient
from stalwart.hpc.slurm.client import SlurmClient
from stalwart.hpc.slurm.partitions import PartitionPool
from stalwart.hpc.states import Outcome
from stalwart.hpc.tracker import JobUpdate
from stalwart.master.cluster.lifecycle import TrialExit, end_allocation, master_log
from stalwart.master.db.tables import Allocation, Container, Task
from stalwart.master.rm import batchjobs
from stalwart.master.rm.base import (
    BatchLauncher,
    EnginePool,
    EnginePools,
    Prepull,
    Reattaches,
    ResourceManager,
    ServiceAddresses,
)
from stalwart.master.rm.hpc import jobs
from stalwart.master.rm.hpc.pools import check_pool, partition_views
from stalwart.master.rm.hpc.settings import BatchSystemSettings, PbsSettings, SlurmSettings
from stalwart.master.rm.hpc.systems import BatchSystem, PbsSystem, SlurmSystem
from stalwart.master.settings import MasterSettings
from stalwart.master.state import MasterState
from stalwart.master.transitions import LIVE_ALLOCATION_STATES

__all__ = ["POOLS_REFRESH_S", "HpcManager", "PbsManager", "SlurmManager", "master_url_for"]

log = logging.getLogger("stalwart.slurm")

POOLS_REFRESH_S = 300.0
"""Seconds between two ``sinfo`` calls (PBS: ``qstat -Q`` + ``pbsnodes``) that refresh the
partitions (pools)."""


def master_url_for(settings: MasterSettings, slurm: BatchSystemSettings) -> str:
    """The master's URL as compute nodes reach it (``slurm.master_url``, else host:port)."""
    if slurm.master_url:
        return slurm.master_url.rstrip("/")
    host = settings.host
    if host in ("0.0.0.0", "::", ""):
        host = os.uname().nodename
    return f"http://{host}:{settings.port}"


def _exit_of(update: JobUpdate, system: str = "Slurm") -> tuple[int | None, str]:
    """A finished job's exit code for its containers (None: no code of the task's own) and the
    reason shown in the trial's logs."""
    status = update.status
    reason = f"{system} job {update.job_id} {status.reason}"
    if status.outcome in (Outcome.SUCCEEDED, Outcome.FAILED) and status.exit_code is not None:
        if status.signal:
            return -status.signal, reason
        return status.exit_code, reason
    return None, reason


def _is_trial(session: Session, allocation: Allocation) -> bool:
    """Whether the allocation runs a trial (not a command, notebook, shell...)."""
    task = session.get(Task, allocation.task_id)
    return task is not None and task.trial_id is not None


@dataclass
class _Stuck:
    """A queued job Slurm says will not start by itself, since ``since`` (monotonic)."""

    job_id: str
    reason: str
    since: float


class HpcManager(
    ResourceManager, Reattaches, EnginePools, Prepull, BatchLauncher, ServiceAddresses
):
    """A batch system as the master's resource manager (see the module docstring)."""

    def __init__(
        self, state: MasterState, settings: BatchSystemSettings, system: BatchSystem
    ) -> None:
        super().__init__(state)
        self.slurm = settings
        self.system = system
        self.name = system.name
        self.scheduler_type = system.name.upper()
        self.container_agent = jobs.engine_of(settings)
        self.master_url = master_url_for(state.settings, settings)
        self.python = settings.python or sys.executable
        self.tracker = system.tracker
        self._cancelled: set[str] = set()
        self._stuck_logged: dict[str, str] = {}
        self._stuck: dict[str, _Stuck] = {}
        self._pools: dict[str, PartitionPool] = {}
        self._pools_at: float | None = None
        self._pools_lock = threading.Lock()

    def clock(self) -> float:
        """The master's monotonic clock (stuck-job and pool-refresh timeouts)."""
        return self.state.clock.monotonic()

    # -- pools --------------------------------------------------------------------------------

    def pools(self, *, refresh: bool = False) -> list[PartitionPool]:
        """The partitions (PBS queues) as resource pools, in sinfo's (qstat's) order. Asks the
        batch system when the last answer is older than :data:`POOLS_REFRESH_S` (or
        ``refresh``); when that fails, the last answer (empty before the first). Thread-safe
        (the API may read it)."""
        with self._pools_lock:
            now = self.clock()
            stale = self._pools_at is None or now - self._pools_at >= POOLS_REFRESH_S
            if refresh or stale:
                self._pools_at = now
                try:
                    found = self.system.partitions()
                except HpcCommandError as exc:
                    log.warning("reading the partitions failed (keeping the last ones): %s", exc)
                else:
                    self._pools = {pool.name: pool for pool in found}
            return list(self._pools.values())

    def engine_pools(self, session: Session) -> list[EnginePool]:
        """Every partition (queue) as a pool (:func:`~stalwart.master.rm.hpc.pools.
        partition_views`)."""
        return [EnginePool(p.view, p.default, p.gpu_types) for p in partition_views(self, session)]

    def check_pool(self, pool: str) -> None:
        """Refuse a pool that is not a partition (:func:`~stalwart.master.rm.hpc.pools.
        check_pool`)."""
        check_pool(self, pool)

    @property
    def prepull_settings(self) -> PrepullSettings:
        """Batch systems follow the master's ``cluster.prepull`` (``stalwart envs precache
        --from-master`` reads the plan)."""
        return self.state.settings.cluster.prepull

    def prepull_pools(self) -> dict[str, SlotType]:
        """Each partition with its slot type (the pools ``GET /api/v1/prepull`` plans for)."""
        return {pool.name: pool.slot_type for pool in self.pools()}

    def service_host(self, session: Session, allocation_id: str, rank: int = 0) -> str | None:
        """The node address the rank's launcher reported at ``batch/start``."""
        row = session.get(Container, (allocation_id, rank))
        return batchjobs.node_address(row) if row is not None else None

    # -- sync (loop step 2) -----------------------------------------------------------------

    def sync(self) -> list[TrialExit]:
        """Cancel, poll, record, end rejected jobs (see the module docstring)."""
        cancelled = self._cancel()
        self._poll(force=cancelled)
        with self.step() as session:
            exits = batchjobs.end_rejected(session, self.container_agent)
            session.commit()
        return exits + self._end_stuck()

    def _end_stuck(self) -> list[TrialExit]:
        """Cancel (one ``scancel``) the jobs stuck in the queue for ``stuck_job_timeout``
        seconds; their trials error at once (``retry=False``: a new job would be stuck too)
        with Slurm's reason in their logs."""
        limit = self.slurm.stuck_job_timeout
        if limit <= 0 or not self._stuck:
            return []
        now = self.clock()
        due = {a: s for a, s in self._stuck.items() if now - s.since >= limit}
        if not due:
            return []
        try:
            self.system.cancel(sorted({s.job_id for s in due.values()}))
        except HpcCommandError as exc:
            log.warning("scancel of stuck jobs failed (retrying next round): %s", exc)
            return []
        exits = []
        with self.step() as session:
            for allocation_id, stuck in due.items():
                del self._stuck[allocation_id]
                self._cancelled.add(stuck.job_id)
                allocation = session.get(Allocation, allocation_id)
                if allocation is None or allocation.batch_job_id != stuck.job_id:
                    continue
                reason = (
                    f"{self.name} job {stuck.job_id} cannot start ({stuck.reason}) and was "
                    f"cancelled after waiting {limit:g} s (resource_manager.stuck_job_timeout); "
                    "change "
                    f"the experiment's (or task's) resources or {self.name.lower()} section, or "
                    f"ask the {self.name} administrators"
                )
                if batchjobs.mark_exited(session, allocation_id, None, reason):
                    master_log(session, allocation.task_id, allocation.id, reason)
                    exit_ = end_allocation(session, allocation, None, reason, retry=False)
                    if exit_ is not None:
                        exits.append(exit_)
                log.warning("allocation %s: %s", allocation_id, reason)
            session.commit()
        return exits

    def reattach(self) -> None:
        """Track every live allocation's job, so a restarted master adopts the jobs of the one
        before. Live allocations recorded under the other batch system's name (PBS jobs a
        master before the per-system names recorded as ``slurm``) become this system's."""
        engine = self.container_agent
        other = "pbs" if engine == "slurm" else "slurm"
        with self.step() as session:
            live = select(Allocation.id).where(
                Allocation.agent_id == other, Allocation.state.in_(LIVE_ALLOCATION_STATES)
            )
            ids = list(session.scalars(live))
            if ids:
                session.execute(
                    update(Allocation).where(Allocation.id.in_(ids)).values(agent_id=engine)
                )
                session.execute(
                    update(Container)
                    .where(Container.allocation_id.in_(ids), Container.agent_id == other)
                    .values(agent_id=engine)
                )
                session.commit()
                log.info("adopted %d live allocation(s) recorded as %s", len(ids), other)
            rows = session.execute(
                select(Allocation.id, Allocation.batch_job_id).where(
                    Allocation.agent_id == engine,
                    Allocation.batch_job_id.is_not(None),
                    Allocation.state.in_(("ASSIGNED", "STARTING", "RUNNING", "TERMINATING")),
                )
            ).all()
        for allocation_id, job_id in rows:
            self.tracker.track(str(job_id), allocation_id)

    def _cancel(self) -> bool:
        """scancel the jobs of allocations being killed, and of queued ones asked to stop;
        whether it cancelled any (poll at once then, to see them end)."""
        with self.step() as session:
            batchjobs.stop_unstarted(session, self.container_agent)
            dying = batchjobs.terminating(
                session, self.container_agent, "killed before it was submitted"
            )
            wanted = {str(a.batch_job_id): a.id for a in dying}
            session.commit()
        todo = sorted(set(wanted) - self._cancelled)
        if not todo:
            return False
        try:
            self.system.cancel(todo)
        except HpcCommandError as exc:
            log.warning("cancelling %s jobs failed (retrying next round): %s", self.name, exc)
            return False
        self._cancelled.update(todo)
        log.info("cancelled %s jobs %s", self.name, ", ".join(todo))
        return True

    def _poll(self, *, force: bool = False) -> None:
        try:
            updates = self.tracker.poll(force=force)
        except HpcCommandError as exc:
            log.warning("polling %s failed (retrying): %s", self.name, exc)
            return
        if updates:
            self._apply(updates)

    def _apply(self, updates: list[JobUpdate]) -> None:
        with self.step() as session:
            for update in updates:
                allocation = session.get(Allocation, update.key)
                if allocation is None or allocation.batch_job_id != update.job_id:
                    continue
                status = update.status
                if status.terminal:
                    self._cancelled.discard(update.job_id)
                    code, reason = _exit_of(update, self.name)
                    if status.outcome is Outcome.PREEMPTED and _is_trial(session, allocation):
                        # Slurm took the node for a higher-priority job: the trial resumes
                        # from its latest checkpoint without using a restart, as after a
                        # preemption it acknowledged (exit 0 after preempt_acked). An
                        # interactive task has nothing to resume: it ends with Slurm's reason.
                        allocation.preempt_requested = True
                        allocation.preempt_acked = True
                        code = 0
                    if batchjobs.mark_exited(session, allocation.id, code, reason):
                        master_log(session, allocation.task_id, allocation.id, reason)
                    self._stuck.pop(allocation.id, None)
                elif status.allocation_state in ("RUNNING", "STARTING"):
                    self._stuck.pop(allocation.id, None)
                    if allocation.state != "TERMINATING":
                        batchjobs.mark_running(session, allocation)
                elif status.allocation_state == "ASSIGNED" and not status.stuck:
                    self._stuck.pop(allocation.id, None)
                elif status.allocation_state == "ASSIGNED" and status.stuck:
                    if allocation.id not in self._stuck:
                        self._stuck[allocation.id] = _Stuck(
                            update.job_id, status.reason, self.clock()
                        )
                    self._stuck[allocation.id].reason = status.reason
                    if self._stuck_logged.get(allocation.id) != status.reason:
                        self._stuck_logged[allocation.id] = status.reason
                        text = f"{self.name} job {update.job_id} will not start: {status.reason}"
                        limit = self.slurm.stuck_job_timeout
                        if limit > 0:
                            text += f" (cancelled if it still cannot start after {limit:g} s)"
                        master_log(session, allocation.task_id, allocation.id, text)
            session.commit()

    # -- schedule (loop step 5) -------------------------------------------------------------

    def schedule(self) -> None:
        """Submit PENDING allocations, and retry unsubmitted ones (see the module docstring)."""
        with self.state.sessions() as session:  # reads only: no lock needed
            pending = list(
                session.scalars(
                    select(Allocation.id)
                    .where(Allocation.state == "PENDING")
                    .order_by(Allocation.id)
                )
            )
            orphans = batchjobs.unsubmitted(session, self.container_agent)
        if not (orphans or pending):
            return
        pools = {pool.name: pool for pool in self.pools()}
        if orphans:
            self._resubmit(orphans, pools)
        for allocation_id in pending:
            with self.step() as session:
                job = jobs.claim_batch(
                    session,
                    allocation_id,
                    self.slurm,
                    master_url=self.master_url,
                    python=self.python,
                    cluster_id=self.state.cluster_id,
                    pools=pools,
                    first_port_offset=self.state.settings.cluster.task_port_offset,
                    startup_hook_of=self.state.settings.startup_hook,
                )
            if job is not None:
                self._submit(job)

    def _resubmit(self, allocation_ids: list[str], pools: dict[str, PartitionPool]) -> None:
        try:
            named = self.system.job_ids_by_name()
        except HpcCommandError as exc:
            log.warning("listing %s jobs failed (retrying next round): %s", self.name, exc)
            return
        for allocation_id in allocation_ids:
            with self.state.sessions() as session:  # reads only
                job = jobs.resume_job(
                    session,
                    allocation_id,
                    self.slurm,
                    master_url=self.master_url,
                    python=self.python,
                    pools=pools,
                )
            if job is None:
                continue
            found = named.get(job.request.job_name)
            if found is not None:
                self._record(job, found)
            else:
                self._submit(job)

    def _submit(self, job: jobs.BatchJob) -> None:
        try:
            self._write_token(job)
            job_id = self.system.submit(job.request)
        except SchedulerArgsError as exc:
            self._reject(job, f"the {self.name} job cannot be built: {exc}")
        except HpcCommandError as exc:
            if exc.retryable:
                log.warning("submitting %s failed (retrying): %s", job.allocation_id, exc)
            else:
                self._reject(job, f"{self.name} rejected the job: {exc}")
        except OSError as exc:
            self._reject(job, f"cannot write the job's files under job_storage_root: {exc}")
        else:
            self._record(job, job_id)

    @staticmethod
    def _write_token(job: jobs.BatchJob) -> None:
        path = Path(job.token_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            os.fchmod(stream.fileno(), 0o600)
            stream.write(job.token + "\n")

    def _record(self, job: jobs.BatchJob, job_id: str) -> None:
        with self.step() as session:
            recorded = batchjobs.record_submission(session, job.allocation_id, job_id)
            allocation = session.get(Allocation, job.allocation_id)
            if recorded and allocation is not None:
                text = f"submitted as {self.name} job {job_id} ({job.request.job_dir})"
                master_log(session, allocation.task_id, allocation.id, text)
            session.commit()
        if recorded:
            self.tracker.track(job_id, job.allocation_id)
            log.info("allocation %s is %s job %s", job.allocation_id, self.name, job_id)

    def _reject(self, job: jobs.BatchJob, message: str) -> None:
        log.warning("allocation %s: %s", job.allocation_id, message)
        with self.step() as session:
            batchjobs.reject(session, job.allocation_id, message)
            session.commit()


class SlurmManager(HpcManager):
    """Slurm as the cluster loop's resource manager; ``client``: a Slurm client to use (tests
    pass a fake one)."""

    def __init__(self, state: MasterState, *, client: SlurmClient | None = None) -> None:
        settings = state.settings.resource_manager
        if not isinstance(settings, SlurmSettings):
            raise TypeError("SlurmManager needs resource_manager.type: slurm")
        system = SlurmSystem(settings, client)
        super().__init__(state, settings, system)
        self.client = system.client


class PbsManager(HpcManager):
    """PBS as the cluster loop's resource manager; ``client``: a PBS client to use."""

    def __init__(self, state: MasterState, *, client: PbsClient | None = None) -> None:
        settings = state.settings.resource_manager
        if not isinstance(settings, PbsSettings):
            raise TypeError("PbsManager needs resource_manager.type: pbs")
        super().__init__(state, settings, PbsSystem(settings, client))
