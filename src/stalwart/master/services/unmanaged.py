"""Unmanaged experiments and trials: the official SDK's detached mode (``core_v2``).

A script run anywhere (no task, no agent) calls ``core_v2.init(..., unmanaged=True)``; the SDK
creates an experiment (``POST /experiments`` with ``unmanaged``, or ``PUT
/experiments/by-external-id/{id}`` to find it again), a trial in it (``POST`` or ``PUT
/trials``), starts the trial (``POST /trials/{id}/start``), reports metrics and checkpoints with
the user's own session, beats ``PATCH /trials/{id}`` and ends it with a state. As Determined
0.38:

- An unmanaged experiment is created PAUSED with no files; the master runs no searcher for it
  (:func:`stalwart.master.cluster.search.drive` skips it), creates no trial and schedules
  nothing. It cannot be activated. Its checkpoints are in the script's storage, which the master
  cannot reach: no checkpoint GC is run for it.
- An external experiment id names one experiment: a second ``PUT`` with it answers the same
  experiment (its config is not changed).
- Trials are created PAUSED in unmanaged experiments only, with task id ``<expId>.<uuid>`` or,
  for an external trial id, ``<expId>.<externalTrialId>`` (a second ``PUT`` answers the same
  trial).
- Starting a trial adds one to its run id and makes it ACTIVE (Determined's RUNNING); without
  ``resume`` a trial already started is refused. A restart answers the trial's latest checkpoint
  and its steps. ``PATCH`` sets the state the script reports (RUNNING, COMPLETED, ERROR...).
- After each change the experiment takes the state of its most progressed trial: ACTIVE over
  COMPLETED over ERROR over PAUSED (Determined's RUNNING > COMPLETED > ERROR > PAUSED). The
  states move along edges of :mod:`stalwart.master.transitions` (the shortest path: a trial
  ACTIVE -> COMPLETED is one edge, an experiment's goes through STOPPING_COMPLETED).

Not done: Determined marks trials whose heartbeats stop as errored; Stalwart leaves them as the
script last reported them (kill the experiment to end them).
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import Checkpoint, Experiment, Trial
from stalwart.master.services.tasks import create_trial
from stalwart.master.transitions import (
    EXPERIMENT_TRANSITIONS,
    TRIAL_TRANSITIONS,
    set_experiment_state,
    set_trial_state,
)

__all__ = [
    "TrialStart",
    "find_by_external_id",
    "find_trial_by_external_ids",
    "new_trial",
    "report_trial_state",
    "require_unmanaged",
    "start_trial",
]

MAX_EXTERNAL_TRIAL_ID = 64
"""Longest external trial id (it is the trial's request id)."""

# Determined's trialv1State names as Stalwart stores them (RUNNING is ACTIVE here).
_REPORTED = {
    "STATE_ACTIVE": "ACTIVE",
    "STATE_RUNNING": "ACTIVE",
    "STATE_PAUSED": "PAUSED",
    "STATE_COMPLETED": "COMPLETED",
    "STATE_ERROR": "ERROR",
    "STATE_CANCELED": "CANCELED",
}
_RANK = {"PAUSED": 10, "ERROR": 20, "COMPLETED": 30, "ACTIVE": 40}


def _path(table: Mapping[str, frozenset[str]], old: str, new: str) -> list[str]:
    """The states after ``old`` on a shortest path to ``new`` (empty if none or the same)."""
    if old == new:
        return []
    came: dict[str, str] = {old: old}
    queue = deque([old])
    while queue:
        state = queue.popleft()
        for nxt in sorted(table.get(state, frozenset())):
            if nxt in came:
                continue
            came[nxt] = state
            if nxt == new:
                path = [new]
                while came[path[-1]] != old:
                    path.append(came[path[-1]])
                return path[::-1]
            queue.append(nxt)
    return []


def _move_trial(session: Session, trial: Trial, new: str) -> None:
    path = _path(TRIAL_TRANSITIONS, trial.state, new)
    if not path and trial.state != new:
        raise FailedPreconditionError(
            f"trial {trial.id} cannot go from {trial.state} to {new} (its experiment may have "
            "been killed)"
        )
    for state in path:
        set_trial_state(session, trial, state)


def _settle_experiment(session: Session, experiment: Experiment) -> None:
    """The experiment takes its most progressed trial's state (when it can get there)."""
    states = session.scalars(select(Trial.state).where(Trial.experiment_id == experiment.id))
    target = max((s for s in states if s in _RANK), key=_RANK.__getitem__, default=None)
    if target is None:
        return
    for state in _path(EXPERIMENT_TRANSITIONS, experiment.state, target):
        set_experiment_state(session, experiment, state)
    if target == "COMPLETED":
        experiment.progress = 1.0


def require_unmanaged(experiment: Experiment) -> None:
    """400 unless ``experiment`` is unmanaged (trials are created and reported by the master
    for the others)."""
    if not experiment.unmanaged:
        raise InvalidArgumentError(
            f"experiment {experiment.id} is managed by the master: only unmanaged experiments "
            "(the SDK's core_v2 detached mode) take trials from outside"
        )


def find_by_external_id(session: Session, external_id: str) -> Experiment | None:
    """The experiment of an external experiment id, if any."""
    return session.scalar(
        select(Experiment).where(Experiment.external_experiment_id == external_id)
    )


def find_trial_by_external_ids(
    session: Session, external_experiment_id: str, external_trial_id: str
) -> Trial | None:
    """The trial of an external trial id in the experiment of an external experiment id."""
    experiment = find_by_external_id(session, external_experiment_id)
    if experiment is None:
        return None
    return session.scalar(
        select(Trial).where(Trial.task_id == f"{experiment.id}.{external_trial_id}")
    )


def new_trial(
    session: Session,
    experiment: Experiment,
    hparams: Mapping[str, Any] | None,
    external_trial_id: str | None = None,
) -> Trial:
    """A PAUSED trial of unmanaged ``experiment`` (commits); with ``external_trial_id``, the
    trial that id names, created the first time."""
    require_unmanaged(experiment)
    if external_trial_id is not None:
        if not external_trial_id or len(external_trial_id) > MAX_EXTERNAL_TRIAL_ID:
            raise InvalidArgumentError(
                f"externalTrialId must be 1 to {MAX_EXTERNAL_TRIAL_ID} characters"
            )
        found = session.scalar(
            select(Trial).where(Trial.task_id == f"{experiment.id}.{external_trial_id}")
        )
        if found is not None:
            return found
    trial = create_trial(
        session,
        experiment,
        hparams=dict(hparams or {}),
        seed=0,
        request_id=external_trial_id or str(uuid.uuid4()),
        state="PAUSED",
    )
    session.commit()
    return trial


@dataclass(frozen=True)
class TrialStart:
    """``v1StartTrialResponse``: the run id, and where a restart resumes from."""

    trial_run_id: int
    steps_completed: int
    latest_checkpoint: str | None


def _unmanaged_trial(session: Session, trial_id: int) -> tuple[Trial, Experiment]:
    trial = session.get(Trial, trial_id)
    if trial is None:
        raise NotFoundError(f"trial {trial_id} not found")
    experiment = session.get(Experiment, trial.experiment_id)
    if experiment is None:
        raise NotFoundError(f"trial {trial_id} not found")
    if not experiment.unmanaged:
        raise InvalidArgumentError(
            f"trial {trial_id} is managed by the master: only unmanaged trials are supported"
        )
    return trial, experiment


def start_trial(session: Session, trial_id: int, *, resume: bool) -> TrialStart:
    """Start a run of an unmanaged trial (commits): ACTIVE, run id + 1. Without ``resume`` a
    trial started before is refused (400)."""
    trial, experiment = _unmanaged_trial(session, trial_id)
    if not resume and trial.run_id != 0:
        raise FailedPreconditionError(f"trial {trial_id} has already been started")
    trial.run_id += 1
    _move_trial(session, trial, "ACTIVE")
    _settle_experiment(session, experiment)
    steps, latest = 0, None
    if trial.run_id > 1 and trial.latest_checkpoint:
        ckpt = session.get(Checkpoint, trial.latest_checkpoint)
        if ckpt is not None:
            latest = ckpt.uuid
            steps = int(
                ckpt.steps_completed
                if ckpt.steps_completed is not None
                else (ckpt.metadata_ or {}).get("steps_completed") or 0
            )
    start = TrialStart(trial_run_id=trial.run_id, steps_completed=steps, latest_checkpoint=latest)
    session.commit()
    return start


def report_trial_state(session: Session, trial_id: int, state: str | None) -> Trial:
    """A heartbeat of an unmanaged trial, with the state its script reports (None: only the
    heartbeat); the experiment follows (commits)."""
    trial, experiment = _unmanaged_trial(session, trial_id)
    if state is not None:
        stored = _REPORTED.get(state)
        if stored is None:
            raise InvalidArgumentError(
                f"state {state} cannot be reported for a trial (one of {', '.join(_REPORTED)})"
            )
        _move_trial(session, trial, stored)
        _settle_experiment(session, experiment)
    session.commit()
    return trial
