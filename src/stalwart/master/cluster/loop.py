"""The cluster loop: one thread that makes experiments run.

Each round (after a hint from the API, an agent's news, or ``cluster.tick`` seconds):

1. **Engine news**: the resource manager's :meth:`~stalwart.master.rm.base.ResourceManager.sync`
   (agents: lost agents; Slurm/PBS: cancels and one poll; Kubernetes: deletes and the
   informers' news) records what its engine did. Before the first round the manager, if it
   :class:`~stalwart.master.rm.base.Reattaches`, rebuilds its tracking from the database.
2. **Ended allocations**: an allocation whose containers all exited ends
   (:func:`~stalwart.master.cluster.lifecycle.end_allocation`); one with a failed container while
   others run is killed (TERMINATING) first.
3. **Searchers**: every experiment with news (hinted, or with trial exits from steps 1-2, or all
   of them on a periodic sweep) is driven (:func:`~stalwart.master.cluster.search.drive`).
4. **Requests**: each ACTIVE trial of an ACTIVE experiment with nothing live gets a PENDING
   allocation (new trials, restarts, resumed trials).
5. **Placement**: the manager's :meth:`~stalwart.master.rm.base.ResourceManager.schedule`
   claims and starts what can run. The round is then counted (``ClusterHints.rounds_done``,
   ``ROUND_KEY``): agent syncs that reported exits are answered with what it placed.
6. **Preemption timeouts**: a task asked to preempt that has not exited after
   ``cluster.preemption_timeout`` is killed.
7. **Settling and checkpoint GC**: stopping experiments whose trials ended reach their terminal
   state; ended experiments get their checkpoint GC.
8. **Stored series**: a few trials without stored summaries and series get them
   (:func:`~stalwart.master.services.series_store.build_pending`), round after round until none
   is left, then again after each sweep.

Step 6 and the idle timeouts are housekeeping: the loop's thread checks them on its idle ticks,
on its sweeps and at most every ``_HOUSEKEEPING_SECONDS`` in between. They count in seconds,
so checking them in every round of a busy cluster (a dozen rounds a second, most woken by
exits) would only delay the next round. Step 7 runs in every round: an experiment that ends
gets its checkpoint GC in the round that ended it.

**The state lock** (``MasterState.lifecycle``) is held for steps 2-4 together (one database
phase in one session, counted in ``ClusterHints.rounds_begun``; nothing that changes a lifecycle
state writes without the lock, so rows the phase loaded stay true through it), for step 6-7's
database work, and by the manager around each of its own database steps; never around an engine
call. Steps 1 and 5 run without it, so a slow ``sbatch`` or Kubernetes API delays only its own
work while pauses, kills and agent syncs are answered.

Every step reads the database afresh and commits in short transactions; a crash at any point
loses nothing (the next round, or the next master, carries on). Signals are delivered after
their commit. A round that raises is logged and the loop goes on. Time is read from
``MasterState.clock``, so tests drive it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from sqlalchemy import exists, select
from sqlalchemy.orm import Session, undefer

from stalwart import handovers
from stalwart.master.cluster.checkpoint_gc import collect_experiment
from stalwart.master.cluster.lifecycle import TrialExit, end_allocation, master_log
from stalwart.master.cluster.search import DRIVEN_STATES, drive
from stalwart.master.db.tables import Allocation, Container, Experiment, Task, Trial
from stalwart.master.rm.base import Reattaches, ResourceManager
from stalwart.master.services.experiment_config import typed_config_of
from stalwart.master.services.experiments import Signals, settle_experiment
from stalwart.master.services.interactive import idle_expired, stop_task, task_config
from stalwart.master.services.series_store import build_pending
from stalwart.master.services.tasks import start_allocation
from stalwart.master.state import ROUND_KEY, MasterState
from stalwart.master.transitions import (
    EXPERIMENT_TERMINAL,
    LIVE_ALLOCATION_STATES,
    PLACED_ALLOCATION_STATES,
    set_allocation_state,
)

__all__ = ["ClusterLoop"]

log = logging.getLogger("stalwart.cluster")


_SWEEP_SECONDS = 5.0
_HOUSEKEEPING_SECONDS = 0.5


@dataclass(frozen=True)
class _Ended:
    """What step 2 did: the trials' exits for their searchers, and how many allocations it
    ended or began to kill."""

    exits: list[TrialExit]
    handled: int


class ClusterLoop:
    """The loop's thread (see the module docstring). ``start`` and ``stop`` are idempotent."""

    def __init__(self, state: MasterState) -> None:
        self.state = state
        self.settings = state.settings.cluster
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_sweep: float | None = None
        self._reattached = False
        self._preempt_seen: dict[str, float] = {}
        self._series_pending = True
        self._last_full: float | None = None
        self._last_housekeeping: float | None = None
        self.rounds = 0

    @property
    def rm(self) -> ResourceManager:
        """The master's resource manager (``MasterState.rm``)."""
        return self.state.rm

    # -- thread ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
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
            woken = hints.event.wait(self.settings.tick)
            hints.event.clear()
            if self._stop.is_set():
                return
            now = self.state.clock.monotonic()
            since = now - (self._last_full or 0.0)
            full = not woken or hints.take_poked() or since >= self.settings.tick
            housekeeping = self._housekeeping_due(now, woken=woken)
            try:
                self.run_round(full=full or self._last_full is None, housekeeping=housekeeping)
            except Exception:
                log.exception("cluster round failed; retrying next round")
                self._stop.wait(0.2)

    def _housekeeping_due(self, now: float, *, woken: bool) -> bool:
        """Whether the loop's next round (at ``now``; ``woken`` by a hint rather than its
        tick) checks the preemption and idle timeouts; counts it as done when it does."""
        last = self._last_housekeeping
        due = not woken or last is None or now - last >= _HOUSEKEEPING_SECONDS
        if due:
            self._last_housekeeping = now
        return due

    # -- one round ---------------------------------------------------------------------------

    def run_round(self, *, full: bool = True, housekeeping: bool = True) -> None:
        """Run steps 1-8 once (also callable directly, e.g. from tests).

        ``full=False`` (the loop's rounds woken by experiment hints alone, such as a validation
        report, within ``cluster.tick`` of the last full round) skips placement when the
        round ended and requested nothing, and the preemption and idle timeouts: nothing they
        look at has changed, and the next full round is at most a tick away.
        ``housekeeping=False`` (the loop's rounds within ``_HOUSEKEEPING_SECONDS`` of the last
        that had it) skips the preemption and idle timeouts."""
        self.rounds += 1
        hints = self.state.hints
        if full:
            self._last_full = self.state.clock.monotonic()
        sweep = False
        try:
            if not self._reattached and isinstance(self.rm, Reattaches):
                self.rm.reattach()
            self._reattached = True
            exits = self.rm.sync()  # no lock: the manager takes it for its own steps
            with self.state.lifecycle, self._session() as session:
                hints.rounds_begun += 1
                held: list[object] = []  # rows the phase loaded, kept in the session's map
                ended = self._end_allocations(session, held)
                exits += ended.exits
                experiments = hints.take_experiments() | {e.experiment_id for e in exits}
                now = self.state.clock.monotonic()
                sweep = self._last_sweep is None or now - self._last_sweep >= _SWEEP_SECONDS
                if sweep:
                    self._last_sweep = now
                    self._series_pending = True
                    full = True
                self._drive(session, experiments, exits, sweep=sweep)
                requested = self._request_allocations(session)
                del held
            if full or ended.handled or requested:
                self.rm.schedule()  # no lock: as sync
        finally:
            with self.state.lifecycle:
                # Counted once placements are committed: a sync recorded while rounds_begun
                # was n, waiting for rounds_done > n, is answered with what round n+1 placed.
                hints.rounds_done = max(hints.rounds_done, hints.rounds_begun)
            self.state.notifier.notify(ROUND_KEY)
        with self.state.lifecycle:
            if full and (housekeeping or sweep):
                self._preemption_timeouts()
                self._idle_timeouts()
            settled = self._settle()
        for experiment_id in settled:  # file deletions: outside the lock
            collect_experiment(self.state.sessions, experiment_id)
        self._build_series()

    def _session(self) -> Session:
        return self.state.sessions()

    # 8. stored series

    def _build_series(self) -> None:
        """Build the stored series of a few trials that have none (trials from before
        migration 0021, imported ones): each round while some were found, then again on the
        next sweep. Outside the state lock: it serializes with the ingest only."""
        if not self._series_pending:
            return
        with self._session() as session:
            self._series_pending = build_pending(session) > 0

    def _commit(self, session: Session, signals: Signals | None = None) -> None:
        """Commit (which wakes log followers), then wake the long-polls and agents of the
        allocations ``signals`` names."""
        session.commit()
        if signals is not None:
            self.state.wake(session, signals.allocation_ids())

    # 2. ended allocations
    def _end_allocations(self, session: Session, held: list[object]) -> _Ended:
        """End each live allocation whose containers all exited, or kill one with a failed
        container while others run; one commit for all. The rows it loads go into ``held``."""
        exits: list[TrialExit] = []
        ended = (
            select(Allocation.id)
            .join(Container, Container.allocation_id == Allocation.id)
            .where(Container.state == "EXITED", Allocation.state.in_(LIVE_ALLOCATION_STATES))
        )
        allocations = list(
            session.scalars(
                select(Allocation).where(Allocation.id.in_(ended)).order_by(Allocation.id)
            )
        )
        if not allocations:
            return _Ended(exits, 0)
        task_ids = sorted({a.task_id for a in allocations})
        containers: dict[str, list[Container]] = {}
        for row in session.scalars(
            select(Container)
            .where(Container.allocation_id.in_([a.id for a in allocations]))
            .order_by(Container.allocation_id, Container.rank)
        ):
            containers.setdefault(row.allocation_id, []).append(row)
        # Loaded in three queries and held through the phase (the session's identity map only
        # keeps objects something refers to): end_allocation's lookups by key find them there.
        held += session.scalars(select(Task).where(Task.task_id.in_(task_ids)))
        held += session.scalars(select(Trial).where(Trial.task_id.in_(task_ids)))
        held += session.scalars(
            select(Experiment)
            .where(Experiment.id.in_(select(Task.experiment_id).where(Task.task_id.in_(task_ids))))
            .options(undefer(Experiment.searcher_state))
        )
        ended_ids: list[str] = []
        killed: set[str] = set()
        for allocation in allocations:
            rows = containers.get(allocation.id, [])
            failed = [r for r in rows if r.state == "EXITED" and r.exit_code != 0]
            if all(r.state == "EXITED" for r in rows):
                first = failed[0] if failed else None
                code = first.exit_code if first is not None else 0
                reason = first.exit_reason if first is not None else None
                exit_ = end_allocation(session, allocation, code, reason)
                ended_ids.append(allocation.id)
                if exit_ is not None:
                    exits.append(exit_)
            elif failed and allocation.state != "TERMINATING":
                set_allocation_state(session, allocation, "TERMINATING")
                killed.add(allocation.id)
        self._commit(session, Signals(kill=killed))  # one commit: the lock is held throughout
        handovers.mark("master.allocation_ended", ended_ids)
        return _Ended(exits, len(allocations))

    # 3. searchers
    def _drive(
        self, session: Session, hinted: set[int], exits: list[TrialExit], *, sweep: bool
    ) -> None:
        """Drive the searchers of the hinted experiments and of those with new exits (every
        driven one on a sweep), one commit each. The exits themselves are on their trials
        (``trials.searcher_exit``): a master killed before this feeds them at its next
        drive (the start's first round is a sweep)."""
        ids = set(hinted) | {exit_.experiment_id for exit_ in exits}
        if sweep:
            ids |= set(
                session.scalars(select(Experiment.id).where(Experiment.state.in_(DRIVEN_STATES)))
            )
        ahead = self.settings.queue_successors and self.rm.queues_successors
        for experiment_id in sorted(ids):
            experiment = session.get(Experiment, experiment_id)
            if experiment is None:
                continue
            signals = drive(session, experiment, ahead=ahead)
            self._commit(session, signals)

    # 4. requests
    def _request_allocations(self, session: Session) -> int:
        """A PENDING allocation for each ACTIVE trial that needs one; how many."""
        live = exists().where(
            Allocation.task_id == Trial.task_id, Allocation.state.in_(LIVE_ALLOCATION_STATES)
        )
        rows = session.execute(
            select(Trial, Task, Experiment.config, Experiment.resource_pool)
            .join(Experiment, Experiment.id == Trial.experiment_id)
            .join(Task, Task.task_id == Trial.task_id)
            .where(
                Trial.state == "ACTIVE",
                Trial.searcher_stopped.is_(False),
                Experiment.state == "ACTIVE",
                Experiment.unmanaged.is_(False),  # their scripts run them
                ~live,
            )
            .order_by(Trial.id)
        ).all()
        for trial, _task, config, pool in rows:  # the task row: for start_allocation
            resources = typed_config_of(trial.experiment_id, config).resources
            start_allocation(
                session,
                trial.task_id,
                slots=resources.slots_per_trial,
                resource_pool=pool or "default",
            )
        if rows:
            session.commit()
        return len(rows)

    # 6. preemption timeouts
    def _preemption_timeouts(self) -> None:
        now = self.state.clock.monotonic()
        with self._session() as session:
            asked = list(
                session.scalars(
                    select(Allocation).where(
                        Allocation.preempt_requested.is_(True),
                        Allocation.state.in_(
                            [s for s in PLACED_ALLOCATION_STATES if s != "TERMINATING"]
                        ),
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

    # 6b. idle interactive tasks
    def _idle_timeouts(self) -> None:
        """Kill interactive tasks idle past their ``idle_timeout``, with a line in their log."""
        with self._session() as session:
            woken: set[str] = set()
            for task in idle_expired(session, self.state.clock.now()):
                seconds = task_config(task).idle_seconds
                reason = f"idle for {seconds:.0f} s (idle_timeout): stopped by the master"
                master_log(session, task.task_id, None, reason)
                woken |= stop_task(session, task, reason)
            if woken:
                self._commit(session, Signals(kill=woken))

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
