"""Converters from run views (:class:`stalwart.master.services.runs.RunView`) to
``v1FlatRun``."""

from __future__ import annotations

from stalwart.master.api.models.common import wire_time
from stalwart.master.api.models.runs import FlatRun, FlatRunExperiment
from stalwart.master.services.runs import RunView

__all__ = ["flat_run"]


def flat_run(run: RunView) -> FlatRun:
    """The ``v1FlatRun`` of a run: its trial, with its experiment's facts; archived when its
    experiment is, its parent archived when its project or workspace is."""
    view, experiment, project, workspace = run.trial, run.experiment, run.project, run.workspace
    trial = view.trial
    searcher = (experiment.config or {}).get("searcher") or {}
    return FlatRun(
        id=trial.id,
        archived=experiment.archived,
        checkpoint_count=view.checkpoint_count,
        checkpoint_size=str(view.checkpoint_size),
        parent_archived=bool((project and project.archived) or (workspace and workspace.archived)),
        project_id=experiment.project_id,
        project_name=project.name if project else "",
        start_time=wire_time(trial.start_time) or "",
        state=f"STATE_{view.state}",
        workspace_id=workspace.id if workspace else 0,
        workspace_name=workspace.name if workspace else "",
        duration=int(view.wall_clock_time),
        end_time=wire_time(trial.end_time),
        experiment=FlatRunExperiment(
            description=experiment.description or "",
            id=experiment.id,
            is_multitrial=experiment.searcher_type != "single",
            name=experiment.name,
            progress=experiment.progress or 0.0,
            resource_pool=experiment.resource_pool,
            searcher_metric=str(searcher.get("metric") or ""),
            searcher_type=experiment.searcher_type,
            forked_from=experiment.parent_id,
        ),
        hyperparameters=trial.hparams or None,
        labels=[str(label) for label in experiment.labels or ()],
        metadata=trial.run_metadata,
        searcher_metric_value=trial.searcher_metric_value,
        user_id=experiment.owner_id,
    )
