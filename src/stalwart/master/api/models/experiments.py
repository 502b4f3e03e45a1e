"""Wire models of experiments (wire doc 3 and 4.2)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "BestSearcherValidationMetricResponse",
    "ContinueExperimentRequest",
    "ContinueExperimentResponse",
    "CreateExperimentRequest",
    "CreateExperimentResponse",
    "ExperimentLabelResponse",
    "ExperimentSortBy",
    "GetExperimentResponse",
    "GetExperimentsResponse",
    "JobSummary",
    "ModelDefResponse",
    "PatchCheckpointStorage",
    "PatchExperimentRequest",
    "PatchExperimentResponse",
    "PatchResources",
    "PreviewHPSearchRequest",
    "PreviewHPSearchResponse",
    "PutExperimentResponse",
    "SearchSummary",
    "SearchUnit",
    "TrialSummary",
    "V1Experiment",
    "V1File",
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
        default_factory=list,
        description="The model definition files; absent or null: none (the SDK's "
        "``create_experiment`` without ``model_dir`` sends null).",
    )
    activate: bool = Field(default=False, description="Start it now (else PAUSED).")
    parent_id: int | None = Field(default=None, description="Forked from this experiment.")
    project_id: int | None = Field(default=None, description="Project (default 1).")
    template: str | None = Field(default=None, description="Config template name.")
    validate_only: bool = Field(default=False, description="Check the config, create nothing.")
    unmanaged: bool | None = Field(
        default=None, description="Unmanaged: the SDK's detached mode (no task, no files)."
    )

    @field_validator("model_definition", mode="before")
    @classmethod
    def _null_is_none(cls, value: Any) -> Any:
        return [] if value is None else value


class ExperimentLabelResponse(WireModel):
    """``v1PutExperimentLabelResponse`` / ``v1DeleteExperimentLabelResponse``."""

    labels: list[str] = Field(default_factory=list, description="The experiment's labels now.")


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
    display_name: str | None = Field(default=None, description="Owner's display name.")
    description: str | None = Field(default=None, description="Description.")
    labels: list[str] = Field(default_factory=list, description="Labels.")
    end_time: str | None = Field(default=None, description="When it ended.")
    duration: int | None = Field(default=None, description="Seconds from start to end (or now).")
    progress: float | None = Field(default=None, description="0 to 1, or null if unknown.")
    resource_pool: str = Field(default="default", description="Resource pool.")
    forked_from: int | None = Field(default=None, description="Parent experiment.")
    trial_ids: list[int] | None = Field(
        default=None, description="Ids of its trials (only when one experiment is asked for)."
    )
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
    best_trial_id: int | None = Field(default=None, description="Trial with the best metric.")
    best_trial_searcher_metric: float | None = Field(
        default=None, description="The best searcher metric value of its trials."
    )
    model_definition_size: int | None = Field(
        default=None, description="Bytes of the stored model definition archive."
    )


class CreateExperimentResponse(WireModel):
    experiment: V1Experiment = Field(description="The new experiment.")
    config: dict[str, Any] | None = Field(description="Its fully defaulted config.")
    warnings: list[str] = Field(
        default_factory=list, description="Only LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED."
    )
    notices: list[str] = Field(
        default_factory=list,
        description="Stalwart: what the submitter should know about the defaulted config (e.g. "
        "which task image the model's imports chose, and how to pin it). Clients that do not "
        "know the field ignore it.",
    )


class ExperimentSortBy(StrEnum):
    """``v1GetExperimentsRequestSortBy``."""

    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    ID = "SORT_BY_ID"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    NUM_TRIALS = "SORT_BY_NUM_TRIALS"
    PROGRESS = "SORT_BY_PROGRESS"
    USER = "SORT_BY_USER"
    NAME = "SORT_BY_NAME"
    FORKED_FROM = "SORT_BY_FORKED_FROM"
    RESOURCE_POOL = "SORT_BY_RESOURCE_POOL"
    PROJECT_ID = "SORT_BY_PROJECT_ID"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    CHECKPOINT_COUNT = "SORT_BY_CHECKPOINT_COUNT"
    SEARCHER_METRIC_VAL = "SORT_BY_SEARCHER_METRIC_VAL"


class GetExperimentsResponse(WireModel):
    """``v1GetExperimentsResponse``: REQUIRED experiments and pagination."""

    experiments: list[V1Experiment] = Field(description="One page of experiments.")
    pagination: Pagination = Field(description="Where this page is.")


class JobSummary(WireModel):
    """``v1JobSummary``: REQUIRED state (jobv1State) and jobsAhead."""

    state: str = Field(description="STATE_QUEUED or STATE_SCHEDULED.")
    jobs_ahead: int = Field(description="Jobs ahead of this one in its pool's queue.")


class GetExperimentResponse(WireModel):
    """``v1GetExperimentResponse``: REQUIRED experiment; config and jobSummary optional."""

    experiment: V1Experiment = Field(description="The experiment.")
    config: dict[str, Any] | None = Field(default=None, description="Its fully defaulted config.")
    job_summary: JobSummary | None = Field(
        default=None, description="Queue position; only while the experiment is active."
    )


class ModelDefResponse(WireModel):
    """``v1GetModelDefResponse``: the model definition as a base64 ``.tar.gz``."""

    b64_tgz: str = Field(description="Base64 of the archive; empty when there is none.")


class BestSearcherValidationMetricResponse(WireModel):
    """``v1GetBestSearcherValidationMetricResponse``."""

    metric: float = Field(description="The best searcher metric value of the experiment.")


class PatchResources(WireRequest):
    """``PatchExperimentPatchResources``: each field that is sent (not null) is changed."""

    max_slots: int | None = Field(
        default=None, description="resources.max_slots; an explicit null removes the limit."
    )
    priority: int | None = Field(default=None, description="resources.priority (1-99).")
    weight: float | None = Field(default=None, description="resources.weight (> 0).")


class PatchCheckpointStorage(WireRequest):
    """``PatchExperimentPatchCheckpointStorage`` (``det e set gc-policy``)."""

    save_experiment_best: int | None = Field(default=None, description="Best kept overall.")
    save_trial_best: int | None = Field(default=None, description="Best kept per trial.")
    save_trial_latest: int | None = Field(default=None, description="Newest kept per trial.")


class PatchExperimentRequest(WireRequest):
    """``v1PatchExperiment``: a partial update; a field that is absent or null is left as is."""

    id: int | None = Field(default=None, description="Must match the path's id when sent.")
    name: str | None = Field(default=None, description="New name (not blank).")
    description: str | None = Field(default=None, description="New description.")
    labels: list[str] | None = Field(default=None, description="The complete new label list.")
    notes: str | None = Field(default=None, description="The experiment's notes (free text).")
    resources: PatchResources | None = Field(default=None, description="Scheduling knobs.")
    checkpoint_storage: PatchCheckpointStorage | None = Field(
        default=None, description="The checkpoint GC policy's counts."
    )


class PatchExperimentResponse(WireModel):
    """``v1PatchExperimentResponse``."""

    experiment: V1Experiment = Field(description="The experiment after the change.")


class ContinueExperimentRequest(WireRequest):
    """``v1ContinueExperimentRequest`` (``det e continue``)."""

    id: int = Field(description="The experiment to continue.")
    override_config: str | None = Field(
        default=None, description="YAML merged over the experiment's config (may be empty)."
    )


class ContinueExperimentResponse(WireModel):
    """``v1ContinueExperimentResponse``: REQUIRED experiment."""

    experiment: V1Experiment = Field(description="The continued experiment.")
    warnings: list[str] = Field(
        default_factory=list, description="Only LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED."
    )


class PutExperimentResponse(WireModel):
    """``v1PutExperimentResponse``: the experiment of an external id (created or found)."""

    experiment: V1Experiment = Field(description="The experiment.")
    config: dict[str, Any] = Field(description="Its config (secrets masked).")


class PreviewHPSearchRequest(WireRequest):
    """``v1PreviewHPSearchRequest`` (``det preview-search``)."""

    config: dict[str, Any] = Field(description="The experiment config, parsed.")
    seed: int | None = Field(default=None, description="Ignored: the plan needs no seed.")


class SearchUnit(WireModel):
    """``v1SearchUnit``: with ``maxLength`` true, the trials train to completion."""

    name: str | None = Field(default=None, description="The length's unit (e.g. batches).")
    value: int | None = Field(default=None, description="How many units.")
    max_length: bool = Field(description="Train to completion (name and value unset).")


class TrialSummary(WireModel):
    """``v1TrialSummary``."""

    count: int = Field(description="How many trials.")
    unit: SearchUnit = Field(description="How long each trains.")


class SearchSummary(WireModel):
    """``v1SearchSummary``: REQUIRED config (the defaulted searcher section)."""

    config: dict[str, Any] = Field(description="The searcher config, defaulted.")
    trials: list[TrialSummary] = Field(default_factory=list, description="The planned trials.")


class PreviewHPSearchResponse(WireModel):
    """``v1PreviewHPSearchResponse``."""

    summary: SearchSummary = Field(description="What the searcher would create.")
