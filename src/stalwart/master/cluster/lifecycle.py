"""The trial lifecycle: what an allocation's end means for its trial (wire doc 5.5 exit table).

Everything here changes rows through :mod:`stalwart.master.transitions`, flushes and never
commits; the cluster loop calls it inside one short transaction per allocation.

:func:`end_allocation` contract (a trial's allocation ended with ``exit_code``; ``None`` means the
agent lost it or could not start it):

- trial ACTIVE, stopped by its searcher: COMPLETED (the searcher wanted it stopped);
- trial ACTIVE that reported invalid hyperparameters: COMPLETED, an early exit (INVALID_HP);
- trial ACTIVE, exit 0 after acknowledging a preemption: preempted, so it stays ACTIVE and the
  loop gives it a new allocation that resumes from its latest checkpoint;
- trial ACTIVE, exit 0: COMPLETED;
- trial ACTIVE, an allocation that could never run (``retry=False``: a batch job the batch
  system rejected): ERROR at once, restarts left or not (retrying cannot help);
- trial ACTIVE, any other exit after one of its lines matched a ``cancel_retries`` log policy
  (:mod:`stalwart.master.services.log_policies`): ERROR at once, with Determined's lines naming
  the policy's pattern and the line;
- trial ACTIVE, any other exit: restarted (``restarts`` + 1; a new allocation resumes from the
  latest checkpoint) while ``restarts < max_restarts``, else ERROR (an early exit, ERRORED). A
  trial that ``exclude_node`` policies keep off agents is ERROR instead of restarted when the
  other agents of its pool have too few slots for it (Determined's ``launch_error``);
- trial PAUSED: stays PAUSED (activate resumes it);
- trial STOPPING_*: settles to its terminal state once nothing runs; a trial killed by a user
  while its experiment runs is reported to the searcher as USER_CANCELED.

The result says which searcher event the trial's end is (:class:`TrialExit`), if any. The same
event is recorded on the trial (``trials.searcher_exit``, :func:`searcher_exit`) in the caller's
transaction, and the experiment's searcher takes it from there
(:func:`stalwart.master.cluster.search.drive`): a master killed after the end committed and
before the searcher heard of it still feeds it once, at its next drive. Each step writes one
line to the trial's logs (source ``master``) so users see why a trial restarted or ended.

An allocation that ended by itself (not one the master asked to stop) with an exit code also
gets Determined's own line first (:func:`determined_exit_line`, for trials and interactive
tasks alike), e.g. ``container failed with non-zero exit code: 3``, which scripts written for
Determined grep for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stalwart.master.db.tables import (
    Agent,
    Allocation,
    Experiment,
    Slot,
    Task,
    TaskLog,
    Trial,
    utcnow,
)
from stalwart.master.searcher.base import ExitedReason
from stalwart.master.services import log_policies
from stalwart.master.services.agents import pass_slots_on
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.experiments import settle_experiment, settle_trial
from stalwart.master.services.logs import normalize_level, note_new_lines
from stalwart.master.transitions import (
    TRIAL_TERMINAL,
    set_allocation_state,
    set_trial_state,
)

__all__ = [
    "NORMAL_EXIT",
    "TrialExit",
    "complete_trial",
    "describe_exit",
    "determined_exit_line",
    "end_allocation",
    "fail_trial",
    "master_log",
    "searcher_exit",
]

_INVALID_HP = frozenset({"INVALID_HP", "EXITED_REASON_INVALID_HP", "INIT_INVALID_HP"})


NORMAL_EXIT = "EXITED"
"""``trials.searcher_exit`` of a trial that exited normally (or was stopped)."""


@dataclass(frozen=True)
class TrialExit:
    """A trial left the search: ``reason`` None means it exited normally (or was stopped)."""

    experiment_id: int
    trial_id: int
    request_id: str
    reason: ExitedReason | None = None


def searcher_exit(trial: Trial, reason: ExitedReason | None) -> TrialExit:
    """Record that ``trial`` left the search, for its searcher to be fed (durably, with the
    caller's transaction); the event."""
    trial.searcher_exit = NORMAL_EXIT if reason is None else reason.value
    return TrialExit(trial.experiment_id, trial.id, trial.request_id, reason)


def master_log(session: Session, task_id: str, allocation_id: str | None, text: str) -> None:
    """One line in a task's logs from the master itself (source ``master``).

    The task's log followers are woken once the caller commits
    (:func:`~stalwart.master.services.logs.note_new_lines`).
    """
    note_new_lines(session, task_id)
    session.add(
        TaskLog(
            task_id=task_id,
            allocation_id=allocation_id,
            timestamp=utcnow(),
            level=normalize_level("INFO"),
            stdtype="stdout",
            source="master",
            log=text if text.endswith("\n") else text + "\n",
        )
    )


def complete_trial(session: Session, trial: Trial) -> TrialExit:
    """An ACTIVE (or PAUSED) trial finished: COMPLETED; a normal searcher exit."""
    set_trial_state(session, trial, "COMPLETED")
    reason = None
    if (trial.early_exit_reason or "") in _INVALID_HP:
        reason = ExitedReason.INVALID_HP
    return searcher_exit(trial, reason)


def fail_trial(session: Session, trial: Trial) -> TrialExit:
    """A trial errored for good: ERROR; an early searcher exit (ERRORED)."""
    if trial.state not in ("STOPPING_ERROR", "ERROR"):
        set_trial_state(session, trial, "STOPPING_ERROR")
    set_trial_state(session, trial, "ERROR")
    return searcher_exit(trial, ExitedReason.ERRORED)


def determined_exit_line(name: str, exit_code: int) -> str:
    """Determined's log line for the end of task ``name`` (a trial is ``Trial T (Experiment
    E)``), word for word, because scripts grep for it: ``... resources failed with non-zero exit
    code: container failed with non-zero exit code: N (exit code N)``, or ``... resources exited
    successfully with a zero exit code``. A process killed by signal ``S`` is ``128 + S``, as a
    container's exit code is."""
    if exit_code == 0:
        return (
            f"{name} was terminated: allocation stopped early after resources exited "
            "successfully with a zero exit code"
        )
    code = 128 - exit_code if exit_code < 0 else exit_code
    return (
        f"{name} was terminated: allocation failed: resources failed with non-zero exit code: "
        f"container failed with non-zero exit code: {code} (exit code {code})"
    )


def describe_exit(exit_code: int | None, reason: str | None) -> str:
    """Why an allocation ended, in the words of the trial's log lines (``it exited with code
    3``, ``it was killed by signal 9``, or the stored reason of one that was lost)."""
    if exit_code is None:
        return reason or "it was lost"
    if exit_code < 0:
        return f"it was killed by signal {-exit_code}"
    return f"it exited with code {exit_code}"


def _short_of_agents(session: Session, allocation: Allocation, task: Task | None) -> str | None:
    """Why a trial that ``exclude_node`` log policies keep off some agents cannot restart (the
    other agents of its pool have fewer slots than it needs: Determined's capacity check), or
    None. Only agents the master knows count (the agent resource manager)."""
    excluded = log_policies.excluded_agents(task.extra if task is not None else None)
    if not excluded or not any(session.get(Agent, a) is not None for a in excluded):
        return None
    pool = allocation.resource_pool
    agents = session.scalars(
        select(Agent.id).where(
            Agent.resource_pool == pool,
            Agent.connected.is_(True),
            Agent.id.not_in(sorted(excluded)),
        )
    ).all()
    slots = session.scalar(
        select(func.count()).select_from(Slot).where(Slot.agent_id.in_(list(agents)))
    )
    if allocation.slots <= 0 and agents:
        return None
    if allocation.slots > 0 and int(slots or 0) >= allocation.slots:
        return None
    return (
        f"task ID {allocation.task_id} slots requested exceeds {pool} resource pool capacity: "
        f"log policies with exclude_node keep the trial off {', '.join(sorted(excluded))}, and "
        f"the other agents of resource pool {pool!r} have {int(slots or 0)} slots of the "
        f"{allocation.slots} it needs: ERROR. Add agents to the pool, or fix the nodes and "
        "continue the experiment"
    )


def _max_restarts(experiment: Experiment) -> int:
    return typed_config(experiment).max_restarts


def end_allocation(
    session: Session,
    allocation: Allocation,
    exit_code: int | None,
    reason: str | None = None,
    *,
    retry: bool = True,
) -> TrialExit | None:
    """Record the end of ``allocation`` and decide its trial's fate (see the module contract)."""
    if allocation.state == "TERMINATED":
        return None
    asked_to_stop = allocation.state == "TERMINATING"
    allocation.exit_code = exit_code
    allocation.exit_reason = reason
    set_allocation_state(session, allocation, "TERMINATED")
    pass_slots_on(session, allocation.id)  # to a queued successor, or freed
    task = session.get(Task, allocation.task_id)
    if task is not None and task.end_time is None and task.trial_id is None:
        task.end_time = utcnow()
    trial = session.get(Trial, task.trial_id) if task and task.trial_id else None
    if task is not None and exit_code is not None and not asked_to_stop:
        name = task.name or task.task_type.capitalize()
        if trial is not None:
            name = f"Trial {trial.id} (Experiment {trial.experiment_id})"
        master_log(session, task.task_id, allocation.id, determined_exit_line(name, exit_code))
    if trial is None:
        return None
    experiment = session.get(Experiment, trial.experiment_id)
    if experiment is None:
        return None
    result = _trial_outcome(
        session, experiment, trial, allocation, exit_code, reason, retry, task=task
    )
    session.flush()
    settle_experiment(session, experiment)
    session.flush()
    return result


def _trial_outcome(
    session: Session,
    experiment: Experiment,
    trial: Trial,
    allocation: Allocation,
    exit_code: int | None,
    reason: str | None,
    retry: bool = True,
    *,
    task: Task | None = None,
) -> TrialExit | None:
    what = describe_exit(exit_code, reason)

    def log(text: str) -> None:
        master_log(session, trial.task_id, allocation.id, text)

    if trial.state.startswith("STOPPING_"):
        was_killed = trial.state == "STOPPING_KILLED"
        settle_trial(session, trial)
        log(f"trial {trial.id} stopped ({what}): {trial.state}")
        if was_killed and trial.state in TRIAL_TERMINAL and experiment.state == "ACTIVE":
            return searcher_exit(trial, ExitedReason.USER_CANCELED)
        return None
    if trial.state != "ACTIVE":
        log(f"trial {trial.id} is {trial.state}: its run ended ({what})")
        return None
    if trial.searcher_stopped:
        log(f"trial {trial.id} completed: the searcher needs no more of it ({what})")
        return complete_trial(session, trial)
    if (trial.early_exit_reason or "") in _INVALID_HP:
        log(f"trial {trial.id} reported invalid hyperparameters ({what})")
        return complete_trial(session, trial)
    if exit_code == 0 and allocation.preempt_acked:
        log(f"trial {trial.id} was preempted ({what}); it resumes from its latest checkpoint")
        return None
    if exit_code == 0:
        log(f"trial {trial.id} completed")
        return complete_trial(session, trial)
    if not retry:
        log(f"trial {trial.id} failed ({what}); retrying cannot help: ERROR")
        return fail_trial(session, trial)
    triggers = log_policies.dont_retry(task)
    if triggers:
        log("trial failed and matched logs to a don't retry policy")  # Determined's lines
        for trigger in triggers:
            log(f"(log {json.dumps(trigger.line)} matched regex {json.dumps(trigger.pattern)})")
        log(
            f"trial {trial.id} failed ({what}) after a log line matched a cancel_retries log "
            "policy, so it is not restarted: ERROR (see the lines above; remove the policy "
            "from log_policies to restart such failures)"
        )
        return fail_trial(session, trial)
    limit = _max_restarts(experiment)
    if trial.restarts < limit:
        trial.restarts += 1
        short = _short_of_agents(session, allocation, task)
        if short is not None:
            log(f"trial {trial.id} failed ({what}) and cannot restart: {short}")
            return fail_trial(session, trial)
        log(
            f"trial {trial.id} failed ({what}); restarting from its latest checkpoint "
            f"(restart {trial.restarts} of {limit})"
        )
        return None
    log(f"trial {trial.id} failed ({what}) and has used its {limit} restarts: ERROR")
    return fail_trial(session, trial)
