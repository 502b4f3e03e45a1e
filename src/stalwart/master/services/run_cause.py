"""Why a run failed: what the UI shows first on a failed trial or experiment.

Contract:

- :func:`trial_cause` of a trial that failed (state ERROR), or that failed and was restarted
  (``restarts`` > 0), names its *last failed allocation*: the newest ended allocation of the
  trial's task whose exit code is not 0 (a lost allocation has none), with its exit code and
  reason (the stored reason, else :func:`~stalwart.master.cluster.lifecycle.describe_exit`'s
  words, as the trial's log says them). For any other trial ``failure`` is None and the lists
  are empty.
- The log-policy outcome comes from the trial's task (:mod:`.log_policies`): the label
  (``logPolicyMatched``, e.g. Determined's default ``CUDA OOM`` / ``ECC Error``), the
  ``cancel_retries`` patterns and the first line each matched, and the agents ``exclude_node``
  policies keep the trial off. The label is reported even for a trial that did not fail.
- ``lines``: up to :data:`MAX_LINES` lines of the failed allocation, oldest first: the last
  lines its processes wrote (not the master's or the agent's, sources ``master`` and
  ``agent``) at level ERROR or CRITICAL, or to stderr without a level (a traceback; a
  ``logging`` record at INFO goes to stderr too, and is no error) (``lines_kind``
  ``"errors"``); when they
  wrote none, its last lines of any kind before the exit, the agent's included (an image that
  would not pull says so there) but not the master's (``"last"``); when there are none, none
  (``"none"``).
  Read with two indexed queries of at most :data:`MAX_LINES` rows each; nothing reads the whole
  log.
- :func:`experiment_cause`: how many trials are in ERROR and the cause of the first trial that
  errored (the earliest end time, then the lowest id); None when none errored.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from stalwart.errors import NotFoundError
from stalwart.master.cluster.lifecycle import describe_exit
from stalwart.master.db.tables import Allocation, Experiment, Task, TaskLog, Trial
from stalwart.master.services import log_policies
from stalwart.master.services.logs import LogRecord

__all__ = [
    "MAX_LINES",
    "ExperimentCause",
    "Failure",
    "PolicyTrigger",
    "TrialCause",
    "experiment_cause",
    "trial_cause",
]

MAX_LINES = 20
"""The most log lines a cause carries."""

ERROR_LEVELS = ("ERROR", "CRITICAL")
NOT_THE_PROCESS = ("master", "agent")
"""Sources of lines the master and the agent write about a run (not the run's own output)."""


@dataclass(frozen=True)
class Failure:
    """The last failed allocation of a trial."""

    allocation_id: str
    exit_code: int | None
    exit_reason: str
    agent_id: str | None
    start_time: dt.datetime
    end_time: dt.datetime | None


@dataclass(frozen=True)
class PolicyTrigger:
    """A ``cancel_retries`` log policy that matched: its pattern and the first line."""

    pattern: str
    line: str


@dataclass(frozen=True)
class TrialCause:
    """Why a trial failed (see the module contract)."""

    trial_id: int
    experiment_id: int
    task_id: str
    state: str
    restarts: int
    failed: bool
    failure: Failure | None
    log_policy_matched: str | None
    dont_retry: list[PolicyTrigger] = field(default_factory=list)
    excluded_agents: list[str] = field(default_factory=list)
    lines: list[LogRecord] = field(default_factory=list)
    lines_kind: str = "none"


@dataclass(frozen=True)
class ExperimentCause:
    """Why an experiment failed: its errored trials and the first one's cause."""

    experiment_id: int
    state: str
    trials_errored: int
    first_errored: TrialCause | None


def _last_failed_allocation(session: Session, task_id: str) -> Allocation | None:
    failed = or_(Allocation.exit_code.is_(None), Allocation.exit_code != 0)
    query = (
        select(Allocation)
        .where(Allocation.task_id == task_id, Allocation.state == "TERMINATED", failed)
        .order_by(Allocation.start_time.desc(), Allocation.id.desc())
        .limit(1)
    )
    return session.scalars(query).first()


def _lines(session: Session, task_id: str, allocation_id: str) -> tuple[list[LogRecord], str]:
    ran = select(TaskLog).where(TaskLog.task_id == task_id, TaskLog.allocation_id == allocation_id)
    not_master = or_(TaskLog.source.is_(None), TaskLog.source != "master")
    own = or_(TaskLog.source.is_(None), TaskLog.source.not_in(NOT_THE_PROCESS))
    unleveled_stderr = and_(TaskLog.stdtype == "stderr", TaskLog.level.is_(None))
    errors = or_(TaskLog.level.in_(ERROR_LEVELS), unleveled_stderr)
    for query, kind in ((ran.where(own, errors), "errors"), (ran.where(not_master), "last")):
        rows = list(session.scalars(query.order_by(TaskLog.id.desc()).limit(MAX_LINES)))
        if rows:
            return [LogRecord.of(row) for row in reversed(rows)], kind
    return [], "none"


def _cause(session: Session, trial: Trial) -> TrialCause:
    task = session.get(Task, trial.task_id)
    extra = task.extra if task is not None else None
    failed = trial.state == "ERROR"
    allocation = (
        _last_failed_allocation(session, trial.task_id) if failed or trial.restarts > 0 else None
    )
    failure = None
    lines: list[LogRecord] = []
    kind = "none"
    if allocation is not None:
        failure = Failure(
            allocation_id=allocation.id,
            exit_code=allocation.exit_code,
            exit_reason=allocation.exit_reason
            or describe_exit(allocation.exit_code, allocation.exit_reason),
            agent_id=allocation.agent_id,
            start_time=allocation.start_time,
            end_time=allocation.end_time,
        )
        lines, kind = _lines(session, trial.task_id, allocation.id)
    triggers = log_policies.dont_retry(task) if failure is not None else []
    excluded = sorted(log_policies.excluded_agents(extra)) if failure is not None else []
    return TrialCause(
        trial_id=trial.id,
        experiment_id=trial.experiment_id,
        task_id=trial.task_id,
        state=trial.state,
        restarts=trial.restarts,
        failed=failed,
        failure=failure,
        log_policy_matched=log_policies.label_of(extra),
        dont_retry=[PolicyTrigger(t.pattern, t.line) for t in triggers],
        excluded_agents=excluded,
        lines=lines,
        lines_kind=kind,
    )


def trial_cause(session: Session, trial_id: int) -> TrialCause:
    """The cause of trial ``trial_id`` (NotFoundError if there is none such)."""
    trial = session.get(Trial, trial_id)
    if trial is None:
        raise NotFoundError(f"trial {trial_id} not found")
    return _cause(session, trial)


def experiment_cause(session: Session, experiment_id: int) -> ExperimentCause:
    """The cause of experiment ``experiment_id`` (NotFoundError if there is none such)."""
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    errored = (Trial.experiment_id == experiment_id, Trial.state == "ERROR")
    count = session.scalar(select(func.count()).select_from(Trial).where(*errored)) or 0
    first = session.scalars(
        select(Trial).where(*errored).order_by(Trial.end_time.asc().nulls_last(), Trial.id).limit(1)
    ).first()
    return ExperimentCause(
        experiment_id=experiment_id,
        state=experiment.state,
        trials_errored=int(count),
        first_errored=_cause(session, first) if first is not None else None,
    )
