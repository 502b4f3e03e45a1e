"""Driving an experiment's searcher from the database (Determined 0.38 semantics, wire doc 6).

The searcher itself is pure (:mod:`stalwart.master.searcher`); this module is the one place that
loads it, feeds it events and carries out its actions, all inside the caller's transaction:

- :func:`drive` loads the searcher from ``experiments.searcher_state`` (or creates it and takes
  its initial actions), feeds it the trials' exits it has not seen (``trials.searcher_exit``,
  recorded with each trial's end, cleared here), the validation reports stored since its cursor
  (the id of the last ``metric_reports`` row it saw; only to a searcher that may act on them,
  :meth:`~stalwart.master.searcher.base.SearchMethod.reacts_to_validations`: a single, grid or
  random search would do nothing with them, and its cursor stays) and the trials' progress,
  carries out the resulting actions, and saves the snapshot and cursor back. Because the
  snapshot, the cursor, the cleared exits and the rows the actions create commit together, a
  master killed at any point re-reads exactly the events the saved searcher has not seen:
  nothing is fed twice, nothing is lost, and no trial is created twice. (The cursor never skips
  a report: each experiment's validation ids become visible in increasing order, see
  ``metrics.lock_validations``.)
- ``Create`` adds a trial (PAUSED while the experiment is paused; the loop gives ACTIVE trials
  allocations). ``Stop`` marks the trial ``searcher_stopped`` and asks its allocations to
  preempt; a trial with nothing running completes at once. ``Shutdown`` moves the experiment to
  STOPPING_COMPLETED (or STOPPING_CANCELED / STOPPING_ERROR) and settles it.
- A :class:`~stalwart.master.searcher.base.SearcherMetricError` (a validation without the
  searcher metric) moves the experiment to STOPPING_ERROR, stops its trials, and writes the
  message to the offending trial's logs.

Experiments that are stopping or terminal are not driven, nor unmanaged ones (the SDK's
detached mode: their script creates their trials). Returns the :class:`Signals` to
deliver after the commit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import MutableMapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.master.cluster.lifecycle import (
    NORMAL_EXIT,
    complete_trial,
    master_log,
)
from stalwart.master.db.tables import Experiment, MetricReport, Trial
from stalwart.master.searcher.actions import Action, Create, Shutdown, Stop
from stalwart.master.searcher.base import ExitedReason, SearcherMetricError, SearchMethod
from stalwart.master.searcher.factory import make_searcher, searcher_class
from stalwart.master.services.experiment_config import typed_config, typed_config_of
from stalwart.master.services.experiments import (
    Signals,
    apply_error,
    live_allocations,
    settle_experiment,
    stop_allocations,
)
from stalwart.master.services.tasks import create_trial
from stalwart.master.transitions import TRIAL_TERMINAL, TRIAL_TRANSITIONS, set_experiment_state

__all__ = ["DRIVEN_STATES", "drive", "validations_wake_searcher"]

DRIVEN_STATES = frozenset({"ACTIVE", "PAUSED"})
"""Experiment states in which the searcher runs."""

_VALIDATION_BATCH = 5000
_KNOWN_SEARCHERS = 10_000
"""Experiments :func:`validations_wake_searcher` remembers before it starts over."""


def validations_wake_searcher(
    session: Session, experiment_id: int, known: MutableMapping[int, bool]
) -> bool:
    """Whether a validation of the experiment's trials should wake the cluster loop: its kind
    of searcher may act on it before the trial exits (ASHA may stop the trial); single, grid
    and random searches do not, and are fed it at their next drive (the trial's exit, or a
    sweep). Remembered in ``known`` (an experiment's searcher never changes)."""
    if experiment_id not in known:
        if len(known) >= _KNOWN_SEARCHERS:
            known.clear()
        config = session.scalar(select(Experiment.config).where(Experiment.id == experiment_id))
        wakes = True
        if config is not None:
            wakes = searcher_class(typed_config_of(experiment_id, config)).reacts_to_validations()
        known[experiment_id] = wakes
    return known[experiment_id]


def _load(experiment: Experiment, *, ahead: bool) -> tuple[SearchMethod, int, list[Action]]:
    """The searcher, its metric cursor, and its initial actions when it is new; ``ahead``: it
    may create trials ahead (:meth:`~stalwart.master.searcher.base.SearchMethod.allow_ahead`)."""
    searcher = make_searcher(typed_config(experiment))
    if ahead:
        searcher.allow_ahead()
    saved = experiment.searcher_state
    if saved and "snapshot" in saved:
        searcher.restore(saved["snapshot"])
        return searcher, int(saved.get("cursor", 0)), []
    return searcher, 0, searcher.initial_actions()


def _new_validations(
    session: Session, experiment: Experiment, cursor: int
) -> list[tuple[int, str, dict[str, Any]]]:
    # Driven by the primary key (only reports newer than the cursor are read), not by the
    # experiment's trials, so the cost does not grow with the experiment's history.
    rows = session.execute(
        select(MetricReport.id, Trial.request_id, MetricReport.metrics)
        .join(Trial, Trial.id == MetricReport.trial_id)
        .where(
            MetricReport.id > cursor,
            MetricReport.group == "validation",
            Trial.experiment_id == experiment.id,
        )
        .order_by(MetricReport.id)
        .limit(_VALIDATION_BATCH)
    ).all()
    return [(int(i), str(r), dict(m or {})) for i, r, m in rows]


def drive(session: Session, experiment: Experiment, *, ahead: bool = False) -> Signals:
    """Feed the experiment's searcher everything new and carry out its actions (no commit).

    ``ahead``: random and grid searches create trials ahead of the exits that make room for
    them, for the resource manager to queue behind running trials (``cluster.queue_successors``
    on a manager that :attr:`~stalwart.master.rm.base.ResourceManager.queues_successors`)."""
    signals = Signals()
    if experiment.state not in DRIVEN_STATES or experiment.unmanaged:
        return signals  # an unmanaged experiment's trials come from its script
    searcher, cursor, actions = _load(experiment, ahead=ahead)
    pending: deque[Action] = deque(actions)
    trials = _Trials(session, experiment.id)
    current = ""
    try:
        for trial in _exited(session, experiment.id):
            trials[trial.request_id] = trial
            pending.extend(_feed_exit(searcher, trial))
        while searcher.reacts_to_validations():  # the others would do nothing with them
            batch = _new_validations(session, experiment, cursor)
            for report_id, request_id, metrics in batch:
                cursor, current = report_id, request_id
                pending.extend(searcher.on_validation(request_id, metrics))
            if len(batch) < _VALIDATION_BATCH:
                break
        for request_id, progress in _live_progress(session, experiment.id):
            searcher.on_trial_progress(request_id, progress)
        _carry_out(session, experiment, searcher, trials, pending, signals)
    except SearcherMetricError as exc:
        offender = trials.get(current)
        if offender is not None:
            master_log(session, offender.task_id, None, f"searcher: {exc}")
        signals.merge(apply_error(session, experiment))
        experiment.searcher_state = {"snapshot": searcher.snapshot(), "cursor": cursor}
        return signals
    experiment.searcher_state = {"snapshot": searcher.snapshot(), "cursor": cursor}
    progress = searcher.progress()
    if experiment.progress != progress:
        experiment.progress = progress
    session.flush()
    return signals


class _Trials:
    """The experiment's trials by request id, read one at a time when an action needs one
    (an experiment may have thousands; a round touches a few)."""

    def __init__(self, session: Session, experiment_id: int) -> None:
        self._session = session
        self._experiment_id = experiment_id
        self._known: dict[str, Trial] = {}

    def get(self, request_id: str) -> Trial | None:
        if request_id not in self._known:
            task_id = f"{self._experiment_id}.{request_id}"
            found = self._session.scalars(select(Trial).where(Trial.task_id == task_id)).first()
            if found is None:
                return None
            self._known[request_id] = found
        return self._known[request_id]

    def __getitem__(self, request_id: str) -> Trial:
        trial = self.get(request_id)
        if trial is None:
            raise KeyError(request_id)
        return trial

    def __setitem__(self, request_id: str, trial: Trial) -> None:
        self._known[request_id] = trial


_LIVE_TRIAL_STATES = tuple(sorted(set(TRIAL_TRANSITIONS) - TRIAL_TERMINAL))
"""The states of a trial that has not ended (listed, so ``ix_trials_experiment_state`` finds
them: a drive reads the live trials, not every trial the experiment had)."""


def _live_progress(session: Session, experiment_id: int) -> list[tuple[str, float]]:
    rows = session.execute(
        select(Trial.request_id, Trial.progress).where(
            Trial.experiment_id == experiment_id,
            Trial.state.in_(_LIVE_TRIAL_STATES),
            Trial.progress.is_not(None),
        )
    )
    return [(str(r), float(p or 0.0)) for r, p in rows]


def _exited(session: Session, experiment_id: int) -> list[Trial]:
    """The experiment's trials whose exit the searcher has not been fed, in trial order."""
    return list(
        session.scalars(
            select(Trial)
            .where(Trial.experiment_id == experiment_id, Trial.searcher_exit.is_not(None))
            .order_by(Trial.id)
        )
    )


def _feed_exit(searcher: SearchMethod, trial: Trial) -> list[Action]:
    """Feed the trial's recorded exit to the searcher, and clear it (same transaction)."""
    recorded, trial.searcher_exit = trial.searcher_exit, None
    if recorded is None:
        return []
    if recorded == NORMAL_EXIT:
        return searcher.on_trial_exited(trial.request_id)
    return searcher.on_trial_exited_early(trial.request_id, ExitedReason(recorded))


def _carry_out(
    session: Session,
    experiment: Experiment,
    searcher: SearchMethod,
    trials: _Trials,
    pending: deque[Action],
    signals: Signals,
) -> None:
    while pending:
        action = pending.popleft()
        if isinstance(action, Create):
            trials[action.request_id] = create_trial(
                session,
                experiment,
                hparams=action.hparams,
                seed=action.trial_seed,
                request_id=action.request_id,
                state="ACTIVE" if experiment.state == "ACTIVE" else "PAUSED",
            )
        elif isinstance(action, Stop):
            trial = trials[action.request_id]
            if trial.state in ("COMPLETED", "ERROR", "CANCELED") or trial.searcher_stopped:
                continue
            trial.searcher_stopped = True
            signals.merge(stop_allocations(session, trial, kill=False))
            if not live_allocations(session, trial) and trial.state == "ACTIVE":
                complete_trial(session, trial)
                pending.extend(_feed_exit(searcher, trial))
        elif isinstance(action, Shutdown):
            _shutdown(session, experiment, action)
            return


def _shutdown(session: Session, experiment: Experiment, action: Shutdown) -> None:
    stopping = "STOPPING_COMPLETED"
    if action.failure:
        stopping = "STOPPING_ERROR"
    elif action.cancel:
        stopping = "STOPPING_CANCELED"
    if experiment.state == "PAUSED" and stopping == "STOPPING_COMPLETED":
        set_experiment_state(session, experiment, "ACTIVE")
    set_experiment_state(session, experiment, stopping)
    session.flush()
    settle_experiment(session, experiment)
