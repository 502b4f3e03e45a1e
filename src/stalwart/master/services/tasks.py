"""Tasks, trials and allocations: the rows a run needs, created in one place.

These functions add rows to the session and flush; they do not commit, so a caller (the
searcher, the scheduler, a test) can create several things in one transaction.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import Allocation, Checkpoint, Experiment, Task, Trial
from stalwart.master.services.auth import token_sha256

__all__ = ["create_trial", "start_allocation", "warm_start_checkpoint"]


def warm_start_checkpoint(session: Session, config: Mapping[str, Any]) -> str | None:
    """The checkpoint a new trial of an experiment with ``config`` starts from, as Determined
    resolves it: ``searcher.source_trial_id``'s latest COMPLETED checkpoint (most steps), or
    ``searcher.source_checkpoint_uuid``; None when neither is set.

    Raises :class:`InvalidArgumentError` when the source trial has no completed checkpoint or
    the uuid is malformed, :class:`NotFoundError` when the trial or checkpoint does not exist.
    """
    searcher = config.get("searcher")
    if not isinstance(searcher, Mapping):
        return None
    trial_id = searcher.get("source_trial_id")
    uuid_text = searcher.get("source_checkpoint_uuid")
    if trial_id is not None:
        if session.get(Trial, int(trial_id)) is None:
            raise NotFoundError(f"searcher.source_trial_id: trial {trial_id} not found")
        latest = session.scalar(
            select(Checkpoint.uuid)
            .where(Checkpoint.trial_id == int(trial_id), Checkpoint.state == "COMPLETED")
            .order_by(Checkpoint.steps_completed.desc(), Checkpoint.report_time.desc())
            .limit(1)
        )
        if latest is None:
            raise InvalidArgumentError(
                f"searcher.source_trial_id: no checkpoint found for source trial {trial_id} "
                "(it has no completed checkpoint to start from)"
            )
        return latest
    if uuid_text is not None:
        try:
            uuid.UUID(str(uuid_text))
        except ValueError:
            raise InvalidArgumentError(
                f"searcher.source_checkpoint_uuid: invalid source checkpoint UUID {uuid_text!r}"
            ) from None
        found = session.get(Checkpoint, str(uuid_text))
        if found is None:
            raise NotFoundError(
                f"searcher.source_checkpoint_uuid: no checkpoint found with UUID {uuid_text}"
            )
        return found.uuid
    return None


def create_trial(
    session: Session,
    experiment: Experiment,
    *,
    hparams: dict[str, object],
    seed: int,
    request_id: str | None = None,
    state: str = "ACTIVE",
) -> Trial:
    """A new trial of ``experiment`` (ACTIVE, or PAUSED in a paused experiment) and its TRIAL
    task (``<expId>.<requestId>``); its warm-start checkpoint is fixed here
    (:func:`warm_start_checkpoint`; a source that has gone since the experiment was created
    leaves the trial starting from scratch)."""
    request = request_id or str(uuid.uuid4())
    task_id = f"{experiment.id}.{request}"
    task = Task(
        task_id=task_id,
        task_type="TRIAL",
        owner_id=experiment.owner_id,
        experiment_id=experiment.id,
    )
    session.add(task)
    trial = Trial(
        experiment_id=experiment.id,
        request_id=request,
        task_id=task_id,
        state=state,
        hparams=hparams,
        seed=seed,
        warm_start_checkpoint=_warm_start_or_none(session, experiment),
        # No reports yet: its stored summary and series are built (empty), so the cluster
        # loop's series_store.build_pending has nothing to do for it.
        summary_metrics={},
    )
    session.add(trial)
    session.flush()
    task.trial_id = trial.id
    task.name = f"Trial {trial.id} (Experiment {experiment.id})"
    return trial


def _warm_start_or_none(session: Session, experiment: Experiment) -> str | None:
    try:
        return warm_start_checkpoint(session, experiment.config or {})
    except (InvalidArgumentError, NotFoundError):
        return None  # checked at creation; gone since (deleted): start from scratch


def start_allocation(
    session: Session,
    task_id: str,
    *,
    slots: int,
    resource_pool: str = "default",
    agent_id: str | None = None,
) -> tuple[Allocation, str]:
    """A new PENDING allocation (``<taskId>.<n>``) of a task and its secret token.

    For a trial's task this starts a new run: the trial's ``run_id`` goes up by one. Only the
    token's hash is stored; the token itself is returned once, for the task's environment.
    """
    task = session.get(Task, task_id)
    if task is None:
        raise NotFoundError(f"task {task_id} not found")
    runs = session.scalar(select(func.count()).where(Allocation.task_id == task_id)) or 0
    token = secrets.token_urlsafe(32)
    allocation = Allocation(
        id=f"{task_id}.{runs + 1}",
        task_id=task_id,
        state="PENDING",
        token_sha256=token_sha256(token),
        slots=slots,
        resource_pool=resource_pool,
        agent_id=agent_id,
    )
    session.add(allocation)
    if task.trial_id is not None:
        trial = session.get(Trial, task.trial_id)
        if trial is not None:
            trial.run_id += 1
    session.flush()
    return allocation, token
