"""Log retention: how long a trial's logs are kept after it ends, and the cleanup that deletes
them (Determined's ``retention_policy``, ``det task cleanup-logs``, ``det e|t set
log-retention``).

Contracts:

- A trial's retention in days is, first found: its own setting (``PUT .../trials/{id}/
  retain_logs``, kept in its task's ``extra`` as ``log_retention_days``), its experiment
  config's ``retention_policy.log_retention_days``, the master's
  ``retention_policy.log_retention_days``; else ``-1``. ``-1`` keeps the logs forever; ``N >= 0``
  makes them expire ``N`` days after the trial's end time.
- :func:`cleanup_logs` deletes every log line of the ended trials whose logs expired, and
  answers how many lines it deleted. Only trials' logs are ever deleted (as Determined does):
  commands, notebooks, shells and TensorBoards keep theirs. Logs of a running trial never expire.
- :func:`remaining_days` answers ``-1`` for kept-forever logs, ``None`` for a trial that has not
  ended, else the whole days left (``0`` once expired).
- :func:`set_experiment_retention` sets the experiment config's retention and every one of its
  trials' (Determined's bulk action does both); new trials of that experiment inherit it.
- Days are validated as the client does: ``-1 <= days <= 32767`` (InvalidArgumentError).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.db.engine import SessionFactory
from stalwart.master.db.tables import Experiment, Task, TaskLog, Trial, utcnow

__all__ = [
    "FOREVER",
    "CleanupSchedule",
    "cleanup_logs",
    "effective_days",
    "remaining_days",
    "set_experiment_retention",
    "set_trial_retention",
    "validate_days",
]

FOREVER = -1
"""Retention days meaning "keep the logs forever"."""

log = logging.getLogger("stalwart.master")

_KEY = "log_retention_days"
_MAX_DAYS = 32767
_CHUNK = 500


def validate_days(days: int) -> int:
    """``days`` if within ``-1..32767`` (Determined's range), else InvalidArgumentError."""
    if isinstance(days, bool) or not isinstance(days, int) or not FOREVER <= days <= _MAX_DAYS:
        raise InvalidArgumentError(
            f"numDays {days!r} is out of range: give -1 (keep forever) to {_MAX_DAYS} days"
        )
    return days


def _as_days(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _experiment_days(experiment: Experiment | None) -> int | None:
    if experiment is None:
        return None
    policy = (experiment.config or {}).get("retention_policy")
    return _as_days(policy.get(_KEY)) if isinstance(policy, dict) else None


def effective_days(
    trial_task: Task | None, experiment: Experiment | None, master_days: int | None
) -> int:
    """The retention of a trial's logs (see the contract's order)."""
    own = _as_days((trial_task.extra or {}).get(_KEY)) if trial_task is not None else None
    for days in (own, _experiment_days(experiment), master_days):
        if days is not None:
            return days
    return FOREVER


def _trial_and_task(session: Session, trial_id: int) -> tuple[Trial, Task | None]:
    trial = session.get(Trial, trial_id)
    if trial is None:
        raise NotFoundError(f"trial {trial_id} not found")
    return trial, session.get(Task, trial.task_id)


def set_trial_retention(session: Session, trial_id: int, days: int) -> None:
    """Set one trial's retention (flushes; the caller commits)."""
    validate_days(days)
    _trial, task = _trial_and_task(session, trial_id)
    if task is None:
        raise NotFoundError(f"trial {trial_id} has no task record")
    task.extra = {**(task.extra or {}), _KEY: days}
    session.flush()


def set_experiment_retention(session: Session, experiment_id: int, days: int) -> None:
    """Set an experiment's retention and its trials' (flushes; the caller commits)."""
    validate_days(days)
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    config = dict(experiment.config or {})
    policy = config.get("retention_policy")
    config["retention_policy"] = {**(policy if isinstance(policy, dict) else {}), _KEY: days}
    experiment.config = config
    task_ids = session.scalars(select(Trial.task_id).where(Trial.experiment_id == experiment_id))
    for task in session.scalars(select(Task).where(Task.task_id.in_(list(task_ids)))):
        task.extra = {**(task.extra or {}), _KEY: days}
    session.flush()


def remaining_days(
    session: Session, trial_id: int, master_days: int | None, *, now: dt.datetime | None = None
) -> int | None:
    """Whole days before the trial's logs expire (see the contract)."""
    trial, task = _trial_and_task(session, trial_id)
    days = effective_days(task, session.get(Experiment, trial.experiment_id), master_days)
    if days == FOREVER:
        return FOREVER
    if trial.end_time is None:
        return None
    end = trial.end_time if trial.end_time.tzinfo else trial.end_time.replace(tzinfo=dt.UTC)
    left = end + dt.timedelta(days=days) - (now or utcnow())
    if left <= dt.timedelta(0):
        return 0
    return math.floor(left / dt.timedelta(days=1))


def _expired_tasks(session: Session, master_days: int | None, now: dt.datetime) -> list[str]:
    rows = session.execute(
        select(Trial.task_id, Trial.end_time, Trial.experiment_id).where(
            Trial.end_time.is_not(None)
        )
    ).all()
    experiments: dict[int, Experiment | None] = {}
    expired: list[str] = []
    task_ids = [row.task_id for row in rows]
    tasks: dict[str, Task] = {}
    for start in range(0, len(task_ids), _CHUNK):
        chunk = task_ids[start : start + _CHUNK]
        tasks.update(
            {t.task_id: t for t in session.scalars(select(Task).where(Task.task_id.in_(chunk)))}
        )
    for task_id, end_time, experiment_id in rows:
        if experiment_id not in experiments:
            experiments[experiment_id] = session.get(Experiment, experiment_id)
        days = effective_days(tasks.get(task_id), experiments[experiment_id], master_days)
        if days == FOREVER or end_time is None:
            continue
        end = end_time if end_time.tzinfo else end_time.replace(tzinfo=dt.UTC)
        if end <= now - dt.timedelta(days=days):
            expired.append(task_id)
    return expired


def cleanup_logs(
    session: Session, master_days: int | None, *, now: dt.datetime | None = None
) -> int:
    """Delete the expired trials' logs; the number of lines deleted (flushes; the caller
    commits)."""
    expired: Sequence[str] = _expired_tasks(session, master_days, now or utcnow())
    removed = 0
    for start in range(0, len(expired), _CHUNK):
        chunk = expired[start : start + _CHUNK]
        result = session.execute(
            delete(TaskLog)
            .where(TaskLog.task_id.in_(chunk))
            .execution_options(synchronize_session=False)
        )
        removed += int(getattr(result, "rowcount", 0) or 0)
    session.flush()
    return removed


class CleanupSchedule:
    """Deletes expired logs every ``interval`` seconds in a daemon thread (the master's
    ``retention_policy.schedule``), first one interval after :meth:`start`; :meth:`stop` ends
    it. A failed pass is logged and the next one runs on time."""

    def __init__(self, sessions: SessionFactory, master_days: int | None, interval: float) -> None:
        self._sessions = sessions
        self._master_days = master_days
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-retention", daemon=True)

    def start(self) -> None:
        """Start the schedule."""
        self._thread.start()

    def stop(self) -> None:
        """Stop it (waits for a pass in progress)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                with self._sessions() as session:
                    removed = cleanup_logs(session, self._master_days)
                    session.commit()
                if removed:
                    log.info("log retention: deleted %d expired trial log lines", removed)
            except Exception:  # a failed pass must not end the schedule
                log.exception("log retention: deleting expired trial logs failed")
