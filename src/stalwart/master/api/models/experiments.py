"""Wire models of experiments (wire doc 3 and 4.2)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import WireModel, WireRequest, wire_time
from stalwart.master.db.tables import Experiment

__all__ = [
    "CreateExperimentRequest",
    "CreateExperimentResponse",
    "V1Experiment",
    "V1File",
    "experiment_to_wire",
]


class V1File(WireRequest):
    """One entry of an uploaded model definition (all fields are sent by the client)."""

    path: str = Field(description="Relative POSIX path.")
    type: int = Field(default=48, description="48 = file, 53 = directory.")
    content: str = Field(default="", description="Base64 of the file's bytes.")
    mode: int = Field(default=0o100644, description="st_mode.")
    mtime: int | str = Field(default=0, description="Modification time (seconds).")
    uid: int = Field(default=0, description="Ignored.")
    gid: int = Field(default=0, description="Ignored.")


class CreateExperimentRequest(WireRequest):
    config: str = Field(description="The experiment config as YAML text, sent verbatim.")
    model_definition: list[V1File] = Field(
        default_factory=list, description="The model definition files."
    )
    activate: bool = Field(default=False, description="Start it now (else PAUSED).")
    parent_id: int | None = Field(default=None, description="Forked from this experiment.")
    project_id: int | None = Field(default=None, description="Project (default 1).")
    template: str | None = Field(default=None, description="Config template name.")
    validate_only: bool = Field(default=False, description="Check the config, create nothing.")
    unmanaged: bool | None = Field(default=None, description="Unmanaged experiments: refused.")


class V1Experiment(WireModel):
    """``v1Experiment``; every field without a default is REQUIRED by the official client."""

    id: int = Field(description="Experiment id.")
    name: str = Field(description="Name.")
    state: str = Field(description="experimentv1State, e.g. STATE_ACTIVE.")
    archived: bool = Field(description="Archived.")
    config: dict[str, Any] = Field(description="The fully defaulted config.")
    job_id: str = Field(description="Job id.")
    num_trials: int = Field(description="Trials created so far.")
    original_config: str = Field(description="The YAML as submitted.")
    project_id: int = Field(description="Project id.")
    project_owner_id: int = Field(description="Owner of the project.")
    searcher_type: str = Field(description="Searcher name.")
    start_time: str = Field(description="Creation time (RFC 3339).")
    username: str = Field(description="Owner's username.")
    user_id: int | None = Field(default=None, description="Owner's id.")
    description: str | None = Field(default=None, description="Description.")
    labels: list[str] = Field(default_factory=list, description="Labels.")
    end_time: str | None = Field(default=None, description="When it ended.")
    progress: float | None = Field(default=None, description="0 to 1, or null if unknown.")
    resource_pool: str = Field(default="default", description="Resource pool.")
    forked_from: int | None = Field(default=None, description="Parent experiment.")
    workspace_id: int | None = Field(default=None, description="Workspace id.")
    workspace_name: str | None = Field(default=None, description="Workspace name.")
    project_name: str | None = Field(default=None, description="Project name.")
    parent_archived: bool = Field(default=False, description="Project or workspace archived.")
    notes: str = Field(default="", description="Notes.")
    searcher_metric: str | None = Field(default=None, description="The searcher's metric.")
    hyperparameters: dict[str, Any] | None = Field(default=None, description="The search space.")
    unmanaged: bool = Field(default=False, description="Always false.")
    checkpoint_size: str = Field(default="0", description="Bytes of checkpoints (int64).")
    checkpoint_count: int = Field(default=0, description="Number of checkpoints.")


def experiment_to_wire(
    exp: Experiment,
    *,
    num_trials: int,
    username: str,
    project_owner_id: int,
    project_name: str | None = None,
    workspace_id: int | None = None,
    workspace_name: str | None = None,
) -> V1Experiment:
    """The wire form of an experiment row."""
    searcher = exp.config.get("searcher", {}) if isinstance(exp.config, dict) else {}
    return V1Experiment(
        id=exp.id,
        name=exp.name,
        state=f"STATE_{exp.state}",
        archived=exp.archived,
        config=exp.config,
        job_id=exp.job_id,
        num_trials=num_trials,
        original_config=exp.original_config,
        project_id=exp.project_id,
        project_owner_id=project_owner_id,
        searcher_type=exp.searcher_type,
        start_time=wire_time(exp.start_time) or "",
        username=username,
        user_id=exp.owner_id,
        description=exp.description,
        labels=[str(label) for label in exp.labels or []],
        end_time=wire_time(exp.end_time),
        progress=exp.progress,
        resource_pool=exp.resource_pool,
        forked_from=exp.parent_id,
        workspace_id=workspace_id,
        workspace_name=workspace_name,
        project_name=project_name,
        searcher_metric=searcher.get("metric"),
        hyperparameters=exp.config.get("hyperparameters"),
    )


class CreateExperimentResponse(WireModel):
    experiment: V1Experiment = Field(description="The new experiment.")
    config: dict[str, Any] | None = Field(description="Its fully defaulted config.")
    warnings: list[str] = Field(
        default_factory=list, description="Only LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED."
    )
