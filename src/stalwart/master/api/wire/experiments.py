"""Wire form of an experiment (the models are in ``api.models.experiments``)."""

from __future__ import annotations

from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.experiments import V1Experiment
from stalwart.master.db.tables import Experiment
from stalwart.master.redact import redact_config, redact_yaml

__all__ = ["experiment_to_wire"]


def experiment_to_wire(
    exp: Experiment,
    *,
    num_trials: int,
    username: str,
    project_owner_id: int,
    project_name: str | None = None,
    workspace_id: int | None = None,
    workspace_name: str | None = None,
    state: str | None = None,
    display_name: str | None = None,
    parent_archived: bool = False,
    checkpoint_count: int = 0,
    checkpoint_size: int = 0,
    trial_ids: list[int] | None = None,
    duration: int | None = None,
) -> V1Experiment:
    """The wire form of an experiment row.

    ``state`` overrides the stored state (the list and get endpoints report an ACTIVE
    experiment as QUEUED, PULLING, STARTING or RUNNING, as Determined does).
    """
    config = redact_config(exp.config) if isinstance(exp.config, dict) else {}
    searcher = config.get("searcher") or {}
    return V1Experiment(
        id=exp.id,
        name=exp.name,
        state=f"STATE_{state or exp.state}",
        archived=exp.archived,
        config=config,
        job_id=exp.job_id,
        num_trials=num_trials,
        original_config=redact_yaml(exp.original_config),
        project_id=exp.project_id,
        project_owner_id=project_owner_id,
        searcher_type=exp.searcher_type,
        start_time=wire_time(exp.start_time) or "",
        username=username,
        user_id=exp.owner_id,
        display_name=display_name,
        description=exp.description,
        labels=[str(label) for label in exp.labels or []],
        notes=exp.notes or "",
        end_time=wire_time(exp.end_time),
        duration=duration,
        progress=exp.progress,
        resource_pool=exp.resource_pool,
        forked_from=exp.parent_id,
        trial_ids=trial_ids,
        workspace_id=workspace_id,
        workspace_name=workspace_name,
        project_name=project_name,
        parent_archived=parent_archived,
        searcher_metric=searcher.get("metric"),
        hyperparameters=config.get("hyperparameters"),
        checkpoint_size=str(checkpoint_size),
        checkpoint_count=checkpoint_count,
    )
