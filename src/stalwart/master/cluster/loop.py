"""The cluster loop: one thread that makes experiments run.

Each round (after a hint from the API, an agent's news, or ``cluster.tick`` seconds):

1. **Lost agents** (looked for at most once a second): an agent silent for
   ``cluster.agent_timeout`` (counted from the master's start at the earliest, so agents can
   reattach after a master restart) is disconnected and its unfinished containers are recorded
   as lost.
2. **Ended allocations**: an allocation whose containers all exited ends
   (:func:`~stalwart.master.cluster.lifecycle.end_allocation`); one with a failed container while
   others run is killed (TERMINATING) first.
3. **Searchers**: every experiment with news (hinted, or with trial exits from step 2, or all of
   them on a periodic sweep) is driven (:func:`~stalwart.master.cluster.search.drive`).
4. **Requests**: each ACTIVE trial of an ACTIVE experiment with nothing live gets a PENDING
   allocation (new trials, restarts, resumed trials).
5. **Scheduling**: a snapshot is read, :func:`~stalwart.master.scheduler.schedule` decides, each
   assignment is claimed in its own transaction and its agents are woken; preemptions are
   signalled. The round is then counted (``ClusterHints.rounds_done``, ``ROUND_KEY``): agent
   syncs that reported exits are answered with what it placed.
6. **Preemption timeouts**: a task asked to preempt that has not exited after
   ``cluster.preemption_timeout`` is killed.
7. **Settling and checkpoint GC**: stopping experiments whose trials ended reach their terminal
   state; ended experiments get their checkpoint GC.

With ``resource_manager: {type: slurm}``, :class:`~stalwart.master.rm.hpc.manager.SlurmManager`
records its jobs' news (scancel, one squeue/sacct poll, rejected jobs) just before step 2, and
submits batch jobs in place of step 5's agent placement. With ``{type: kubernetes}``,
:class:`~stalwart.master.rm.kubernetes.manager.KubernetesManager` does the same with
Kubernetes Jobs.

Every step reads the database afresh and commits in short transactions; a crash at any point
loses nothing (the next round, or the next master, carries on). Signals are delivered after
their commit. A round that raises is logged and the loop goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Protocol

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from stalwart.environments.images import DeviceType
from stalwart.master.cluster.agent_sync import agent_key
from stalwart.master.cluster.checkpoint_gc import collect_experiment
from stalwart.master.cluster.lifecycle import TrialExit, end_allocation, master_log
from stalwart.master.cluster.placement import (
    PLACED_STATES,
    claim,
    read_snapshot,
    unschedulable_reason,
)
from stalwart.master.cluster.search import DRIVEN_STATES, drive
from stalwart.master.db.tables import (
    LIVE_CONTAINER_STATES,
    Agent,
    Allocation,
    Container,
    Experiment,
    Trial,
    utcnow,
)
from stalwart.master.rm.hpc.manager import PbsManager, SlurmManager
from stalwart.master.rm.hpc.settings import PbsSettings, SlurmSettings
from stalwart.master.rm.kubernetes.settings import KubernetesSettings
from stalwart.master.scheduler import Placement, Snapshot, schedule
from stalwart.master.services.allocations import request_preemption
from stalwart.master.services.experiments import Signals, settle_experiment
from stalwart.master.services.tasks import start_allocation
from stalwart.master.state import ROUND_KEY, MasterState, allocation_key, task_logs_key
from stalwart.master.transitions import (
    EXPERIMENT_TERMINAL,
    LIVE_ALLOCATION_STATES,
    set_allocation_state,
)

__all__ = ["BatchManager", "ClusterLoop"]

log = logging.getLogger("stalwart.cluster")


class BatchManager(Protocol):
    """A resource manager that replaces agent placement: Slurm
    (:class:`~stalwart.master.rm.hpc.manager.SlurmManager`) or Kubernetes
    (:class:`~stalwart.master.rm.kubernetes.manager.KubernetesManager`)."""

    def sync(self) -> list[TrialExit]: ...

    def schedule(self) -> None: ...

    def prepull_pools(self) -> Mapping[str, DeviceType]:
        """The manager's resource pools with their slot types (for the pre-pull plan)."""
        ...


_SWEEP_SECONDS = 5.0


class ClusterLoop:
    """The loop's thread (see the module docstring). ``start`` and ``stop`` are idempotent."""

    def __init__(self, state: MasterState) -> None:
        self.state = state
        self.settings = state.settings.cluster
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()
        self._last_sweep = 0.0
        self._last_reap = 0.0
        self._preempt_seen: dict[str, float] = {}
        self._explained: set[str] = set()
        self.rounds = 0
        self.batch: BatchManager | None = None
        if isinstance(state.settings.resource_manager, SlurmSettings):
            self.batch = SlurmManager(state)
        elif isinstance(state.settings.resource_manager, PbsSettings):
            self.batch = PbsManager(state)
        elif isinstance(state.settings.resource_manager, KubernetesSettings):
            # Imported only when configured: the master needs nothing of it otherwise.
            from stalwart.master.rm.kubernetes.manager import KubernetesManager

            self.batch = KubernetesManager(state)
        """The batch resource manager (Slurm, Kubernetes) when configured: it replaces agent
        placement (step 5) and records its jobs' news before step 2."""

    # -- thread ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="stalwart-cluster", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.state.hints.poke()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        hints = self.state.hints
        while not self._stop.is_set():
            hints.event.wait(self.settings.tick)
            hints.event.clear()
            if self._stop.is_set():
                return
            try:
                self.run_round()
            except Exception:
                log.exception("cluster round failed; retrying next round")
                time.sleep(0.2)

    # -- one round ---------------------------------------------------------------------------

    def run_round(self) -> None:
        """Run steps 1-7 once (also callable directly, e.g. from tests)."""
        self.rounds += 1
        with self.state.lifecycle:
            try:
                self._reap_lost_agents()
                exits = self.batch.sync() if self.batch is not None else []
                exits += self._end_allocations()
                experiments = self.state.hints.take_experiments() | {e.experiment_id for e in exits}
                now = time.monotonic()
                sweep = now - self._last_sweep >= _SWEEP_SECONDS
                if sweep:
                    self._last_sweep = now
                self._drive(experiments, exits, sweep=sweep)
                self._request_allocations()
                self._schedule()
            finally:
                # Counted under the lock, once placements are committed: a sync that saw n
                # rounds and waits for n + 1 is answered with what the next round placed.
                self.state.hints.rounds_done += 1
                self.state.notifier.notify(ROUND_KEY)
            self._preemption_timeouts()
            ended = self._settle()
        for experiment_id in ended:  # file deletions: outside the lock
            collect_experiment(self.state.sessions, experiment_id)

    def _session(self) -> Session:
        return self.state.sessions()

    def _commit(self, session: Session, signals: Signals | None = None) -> None:
        """Commit, then wake log followers, long-polls and agents of what changed."""
        tasks = session.info.pop("log_tasks", set())
        session.commit()
        notifier = self.state.notifier
        for task_id in tasks:
            notifier.notify(task_logs_key(task_id))
        if signals is not None:
            self._wake(session, signals.allocation_ids())

    def _wake(self, session: Session, allocation_ids: Iterable[str]) -> None:
        ids = sorted(set(allocation_ids))
        if not ids:
            return
        for allocation_id in ids:
            self.state.notifier.notify(allocation_key(allocation_id))
        agents = session.scalars(
            select(Container.agent_id).where(Container.allocation_id.in_(ids)).distinct()
        )
        for agent_id in list(agents):
            self.state.notifier.notify(agent_key(agent_id))

    # 1. lost agents
    def _reap_lost_agents(self) -> None:
        timeout = self.settings.agent_timeout
        now = time.monotonic()
        if now - self._started < timeout or now - self._last_reap < min(1.0, timeout / 4):
            return  # too early to tell, or looked a moment ago (a sub-second check is plenty)
        self._last_reap = now
        cutoff = utcnow().timestamp() - timeout
        with self._session() as session:
            lost = [
                a
                for a in session.scalars(select(Agent).where(Agent.connected.is_(True)))
                if a.last_heartbeat.timestamp() < cutoff
            ]
            for agent in lost:
                agent.connected = False
                for row in session.scalars(
                    select(Container).where(
                        Container.agent_id == agent.id,
                        Container.state.in_(LIVE_CONTAINER_STATES),
                    )
                ):
                    row.state = "EXITED"
                    row.exit_code = None
                    row.exit_reason = f"agent {agent.id} was lost (no sync for {timeout:g}s)"
                    row.exited_at = utcnow()
                log.warning("agent %s lost: no sync for %gs", agent.id, timeout)
            if lost:
                session.commit()

    # 2. ended allocations
    def _end_allocations(self) -> list[TrialExit]:
        exits: list[TrialExit] = []
        with self._session() as session:
            candidates = list(
                session.scalars(
                    select(Allocation.id)
                    .join(Container, Container.allocation_id == Allocation.id)
                    .where(
                        Container.state == "EXITED", Allocation.state.in_(LIVE_ALLOCATION_STATES)
                    )
                    .distinct()
                )
            )
        for allocation_id in candidates:
            with self._session() as session:
                allocation = session.get(Allocation, allocation_id)
                if allocation is None or allocation.state == "TERMINATED":
                    continue
                rows = list(
                    session.scalars(
                        select(Container)
                        .where(Container.allocation_id == allocation_id)
                        .order_by(Container.rank)
                    )
                )
                failed = [r for r in rows if r.state == "EXITED" and r.exit_code != 0]
                if all(r.state == "EXITED" for r in rows):
                    first = failed[0] if failed else None
                    code = first.exit_code if first is not None else 0
                    reason = first.exit_reason if first is not None else None
                    exit_ = end_allocation(session, allocation, code, reason)
                    self._commit(session)
                    if exit_ is not None:
                        exits.append(exit_)
                elif failed and allocation.state != "TERMINATING":
                    set_allocation_state(session, allocation, "TERMINATING")
                    self._commit(session, Signals(kill={allocation_id}))
        return exits

    # 3. searchers
    def _drive(self, hinted: set[int], exits: list[TrialExit], *, sweep: bool) -> None:
        by_experiment: dict[int, list[TrialExit]] = {}
        for exit_ in exits:
            by_experiment.setdefault(exit_.experiment_id, []).append(exit_)
        ids = set(hinted) | set(by_experiment)
        if sweep:
            with self._session() as session:
                ids |= set(
                    session.scalars(
                        select(Experiment.id).where(Experiment.state.in_(DRIVEN_STATES))
                    )
                )
        for experiment_id in sorted(ids):
            with self._session() as session:
                experiment = session.get(Experiment, experiment_id)
                if experiment is None:
                    continue
                signals = drive(session, experiment, by_experiment.get(experiment_id, ()))
                self._commit(session, signals)

    # 4. requests
    def _request_allocations(self) -> None:
        with self._session() as session:
            live = exists().where(
                Allocation.task_id == Trial.task_id, Allocation.state.in_(LIVE_ALLOCATION_STATES)
            )
            rows = session.execute(
                select(Trial, Experiment.config, Experiment.resource_pool)
                .join(Experiment, Experiment.id == Trial.experiment_id)
                .where(
                    Trial.state == "ACTIVE",
                    Trial.searcher_stopped.is_(False),
                    Experiment.state == "ACTIVE",
                    ~live,
                )
                .order_by(Trial.id)
            ).all()
            for trial, config, pool in rows:
                resources = config.get("resources") or {}
                slots = resources.get("slots_per_trial")
                start_allocation(
                    session,
                    trial.task_id,
                    slots=slots if isinstance(slots, int) else 1,
                    resource_pool=pool or "default",
                )
            if rows:
                session.commit()

    # 5. scheduling
    def _schedule(self) -> None:
        if self.batch is not None:
            self.batch.schedule()
            return
        with self._session() as session:
            snapshot = read_snapshot(session, self.state.settings)
        if not any(not r.running for r in snapshot.requests):
            return
        decision = schedule(snapshot)
        for allocation_id, placement in sorted(decision.assignments.items()):
            with self._session() as session:
                claimed = claim(session, allocation_id, placement, cluster_id=self.state.cluster_id)
            if claimed is not None:
                for agent_id in claimed.agent_ids:
                    self.state.notifier.notify(agent_key(agent_id))
        for allocation_id in decision.preemptions:
            with self._session() as session:
                request_preemption(session, allocation_id)
                self._commit(session, Signals(preempt={allocation_id}))
        self._explain_waits(snapshot, decision.assignments)

    def _explain_waits(self, snapshot: Snapshot, started: Mapping[str, Placement]) -> None:
        """Tell a trial, once, why it cannot start: no agent serves its pool, or the pool has
        fewer slots than it needs. (Waiting behind other work needs no explanation.)"""
        for request in snapshot.requests:
            if request.running or request.allocation_id in started:
                continue
            if request.allocation_id in self._explained:
                continue
            why = unschedulable_reason(snapshot, request)
            if why is None:
                continue
            self._explained.add(request.allocation_id)
            with self._session() as session:
                allocation = session.get(Allocation, request.allocation_id)
                if allocation is not None:
                    master_log(session, allocation.task_id, allocation.id, why)
                    self._commit(session)

    # 6. preemption timeouts
    def _preemption_timeouts(self) -> None:
        now = time.monotonic()
        with self._session() as session:
            asked = list(
                session.scalars(
                    select(Allocation).where(
                        Allocation.preempt_requested.is_(True),
                        Allocation.state.in_([s for s in PLACED_STATES if s != "TERMINATING"]),
                    )
                )
            )
            seen = {a.id for a in asked}
            self._preempt_seen = {k: v for k, v in self._preempt_seen.items() if k in seen}
            overdue = []
            for allocation in asked:
                first = self._preempt_seen.setdefault(allocation.id, now)
                if now - first >= self.settings.preemption_timeout:
                    set_allocation_state(session, allocation, "TERMINATING")
                    overdue.append(allocation.id)
            if overdue:
                log.warning("killing allocations that did not preempt in time: %s", overdue)
                self._commit(session, Signals(kill=set(overdue)))

    # 7. settling and checkpoint GC
    def _settle(self) -> list[int]:
        """Settle stopping experiments; the ended ones that still need checkpoint GC."""
        with self._session() as session:
            stopping = list(
                session.scalars(select(Experiment).where(Experiment.state.like("STOPPING_%")))
            )
            moved = [e for e in stopping if settle_experiment(session, e)]
            if moved:
                session.commit()
            return list(
                session.scalars(
                    select(Experiment.id).where(
                        Experiment.state.in_(EXPERIMENT_TERMINAL - {"DELETED"}),
                        Experiment.checkpoints_collected.is_(False),
                    )
                )
            )
