"""Wire models of projects (``v1Project``, notes) and of moving experiments."""

from __future__ import annotations

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "DeleteProjectResponse",
    "ExperimentActionResult",
    "GetProjectResponse",
    "GetWorkspaceProjectsResponse",
    "MoveExperimentRequest",
    "MoveExperimentsRequest",
    "MoveExperimentsResponse",
    "MoveProjectRequest",
    "Note",
    "NotesResponse",
    "PatchProjectRequest",
    "PostProjectRequest",
    "ProjectResponse",
    "PutProjectNotesRequest",
    "V1Project",
]


class Note(WireRequest):
    """``v1Note``."""

    name: str = Field(description="The note's title.")
    contents: str = Field(description="Its text (Markdown).")


class V1Project(WireModel):
    """``v1Project``: REQUIRED id, name, workspaceId, archived, immutable, key, notes,
    numActiveExperiments, numExperiments, numRuns, state, userId, username, errorMessage."""

    id: int = Field(description="The project id.")
    name: str = Field(description="Its name, unique in its workspace.")
    key: str = Field(description="Its short unique key.")
    description: str = Field(default="", description="Its description.")
    workspace_id: int = Field(description="Its workspace.")
    workspace_name: str = Field(description="Its workspace's name.")
    archived: bool = Field(description="Archived itself or through its workspace.")
    immutable: bool = Field(description="The built-in project cannot change.")
    notes: list[Note] = Field(default_factory=list, description="Its notes.")
    num_active_experiments: int = Field(description="Its experiments not yet finished.")
    num_experiments: int = Field(description="Its experiments.")
    num_runs: int = Field(description="Its trials.")
    state: str = Field(description="v1WorkspaceState.")
    user_id: int = Field(description="Who created it.")
    username: str = Field(description="Who created it.")
    error_message: str = Field(default="", description="Why a deletion failed, if it did.")
    last_experiment_started_at: str | None = Field(
        default=None, description="When its newest experiment started."
    )


class ProjectResponse(WireModel):
    """``v1PostProjectResponse`` / ``v1PatchProjectResponse``."""

    project: V1Project = Field(description="The project.")


class GetProjectResponse(ProjectResponse):
    """``v1GetProjectResponse``."""


class GetWorkspaceProjectsResponse(WireModel):
    """``v1GetWorkspaceProjectsResponse``."""

    projects: list[V1Project] = Field(default_factory=list, description="The projects.")
    pagination: Pagination = Field(description="Paging.")


class PostProjectRequest(WireRequest):
    """``v1PostProjectRequest``."""

    name: str = Field(description="Its name.")
    workspace_id: int | None = Field(default=None, description="Its workspace (the path's).")
    description: str | None = Field(default=None, description="Its description.")
    key: str | None = Field(default=None, description="Its key (made from the name if unset).")


class PatchProjectRequest(WireRequest):
    """``v1PatchProject``: null fields stay as they are."""

    name: str | None = Field(default=None, description="A new name.")
    description: str | None = Field(default=None, description="A new description.")
    key: str | None = Field(default=None, description="A new key.")


class DeleteProjectResponse(WireModel):
    """``v1DeleteProjectResponse``: Stalwart deletes at once."""

    completed: bool = Field(description="Whether the deletion is finished.")


class PutProjectNotesRequest(WireRequest):
    """``v1PutProjectNotesRequest``."""

    notes: list[Note] = Field(default_factory=list, description="All the notes.")
    project_id: int | None = Field(default=None, description="The project (the path's).")


class NotesResponse(WireModel):
    """``v1PutProjectNotesResponse`` / ``v1AddProjectNoteResponse``."""

    notes: list[Note] = Field(default_factory=list, description="The project's notes now.")


class MoveProjectRequest(WireRequest):
    """``v1MoveProjectRequest``."""

    destination_workspace_id: int = Field(description="Where to move it.")
    project_id: int | None = Field(default=None, description="The project (the path's).")


class MoveExperimentRequest(WireRequest):
    """``v1MoveExperimentRequest``."""

    destination_project_id: int = Field(description="Where to move it.")
    experiment_id: int | None = Field(default=None, description="The experiment (the path's).")


class MoveExperimentsRequest(WireRequest):
    """``v1MoveExperimentsRequest`` (filters are not supported: name the experiments)."""

    destination_project_id: int = Field(description="Where to move them.")
    experiment_ids: list[int] = Field(default_factory=list, description="What to move.")
    project_id: int | None = Field(default=None, description="Their project (the path's).")


class ExperimentActionResult(WireModel):
    """``v1ExperimentActionResult``: an empty ``error`` means done."""

    error: str = Field(description="Why it was not moved ('' when it was).")
    id: int = Field(description="The experiment.")


class MoveExperimentsResponse(WireModel):
    """``v1MoveExperimentsResponse``."""

    results: list[ExperimentActionResult] = Field(description="One per experiment.")
