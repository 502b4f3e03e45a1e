"""Wire models of workspaces: ``v1Workspace`` and ``v1GetWorkspacesResponse``."""

from __future__ import annotations

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel

__all__ = ["GetWorkspaceResponse", "GetWorkspacesResponse", "V1Workspace"]


class V1Workspace(WireModel):
    """``v1Workspace``: REQUIRED id, name, archived, username, immutable, numProjects, pinned,
    userId, numExperiments, state, errorMessage."""

    id: int = Field(description="The workspace id.")
    name: str = Field(description="Its unique name.")
    archived: bool = Field(description="Whether it is archived.")
    username: str = Field(description="Who created it.")
    user_id: int = Field(description="Who created it.")
    immutable: bool = Field(description="The built-in workspace cannot change.")
    num_projects: int = Field(description="Its projects.")
    num_experiments: int = Field(description="Its experiments.")
    pinned: bool = Field(description="Pinned by the caller.")
    state: str = Field(description="v1WorkspaceState, e.g. WORKSPACE_STATE_UNSPECIFIED.")
    error_message: str = Field(description="Why a deletion failed, if it did.")


class GetWorkspacesResponse(WireModel):
    """``v1GetWorkspacesResponse``."""

    workspaces: list[V1Workspace] = Field(default_factory=list, description="The workspaces.")
    pagination: Pagination = Field(description="Paging.")


class GetWorkspaceResponse(WireModel):
    """``v1GetWorkspaceResponse``."""

    workspace: V1Workspace = Field(description="The workspace.")
