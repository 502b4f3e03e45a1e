"""Tasks, trials and allocations: the rows a run needs, created in one place.

These functions add rows to the session and flush; they do not commit, so a caller (the
searcher, the scheduler, a test) can create several things in one transaction.
"""

from __future__ import annotations

import secrets
import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stalwart.errors import NotFoundError
from stalwart.master.db.tables import Allocation, Experiment, Task, Trial
from stalwart.master.services.auth import token_sha256

__all__ = ["create_trial", "start_allocation"]


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
    task (``<expId>.<requestId>``)."""
    request = request_id or str(uuid.uuid4())
    task_id = f"{experiment.id}.{request}"
    session.add(
        Task(
            task_id=task_id,
            task_type="TRIAL",
            owner_id=experiment.owner_id,
            experiment_id=experiment.id,
        )
    )
    trial = Trial(
        experiment_id=experiment.id,
        request_id=request,
        task_id=task_id,
        state=state,
        hparams=hparams,
        seed=seed,
    )
    session.add(trial)
    session.flush()
    task = session.get(Task, task_id)
    if task is not None:
        task.trial_id = trial.id
        task.name = f"Trial {trial.id} (Experiment {experiment.id})"
    return trial


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
