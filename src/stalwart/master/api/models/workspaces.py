"""Wire models of workspaces: ``v1Workspace``, its requests and responses."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "AgentUserGroup",
    "DeleteWorkspaceResponse",
    "GetWorkspaceResponse",
    "GetWorkspacesResponse",
    "PatchWorkspaceRequest",
    "PatchWorkspaceResponse",
    "PostWorkspaceRequest",
    "PostWorkspaceResponse",
    "V1Workspace",
]


class AgentUserGroup(WireRequest):
    """``v1AgentUserGroup``: the OS identity tasks run as (all four, or none)."""

    agent_uid: int | None = Field(default=None, description="The user id.")
    agent_gid: int | None = Field(default=None, description="The group id.")
    agent_user: str | None = Field(default=None, description="The user name.")
    agent_group: str | None = Field(default=None, description="The group name.")


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
    agent_user_group: AgentUserGroup | None = Field(
        default=None, description="The OS identity its tasks run as (null: their owners')."
    )
    checkpoint_storage_config: dict[str, Any] | None = Field(
        default=None, description="Checkpoint storage of its experiments (null: the master's)."
    )
    default_compute_pool: str | None = Field(
        default=None, description="Pool of its jobs with slots that name none."
    )
    default_aux_pool: str | None = Field(
        default=None, description="Pool of its zero-slot jobs that name none."
    )
    pinned_at: str | None = Field(default=None, description="When the caller pinned it.")


class GetWorkspacesResponse(WireModel):
    """``v1GetWorkspacesResponse``."""

    workspaces: list[V1Workspace] = Field(default_factory=list, description="The workspaces.")
    pagination: Pagination = Field(description="Paging.")


class GetWorkspaceResponse(WireModel):
    """``v1GetWorkspaceResponse``."""

    workspace: V1Workspace = Field(description="The workspace.")


class PostWorkspaceRequest(WireRequest):
    """``v1PostWorkspaceRequest`` (Kubernetes namespace bindings and quotas are ignored)."""

    name: str = Field(description="Its unique name.")
    agent_user_group: AgentUserGroup | None = Field(default=None, description="Task identity.")
    checkpoint_storage_config: dict[str, Any] | None = Field(
        default=None, description="Checkpoint storage of its experiments."
    )
    default_compute_pool: str | None = Field(default=None, description="Default compute pool.")
    default_aux_pool: str | None = Field(default=None, description="Default aux pool.")


class PostWorkspaceResponse(WireModel):
    """``v1PostWorkspaceResponse``."""

    workspace: V1Workspace = Field(description="The new workspace.")
    namespace_bindings: dict[str, Any] = Field(
        default_factory=dict, description="Kubernetes namespace bindings (none)."
    )


class PatchWorkspaceRequest(WireRequest):
    """``v1PatchWorkspace``: null fields stay as they are."""

    name: str | None = Field(default=None, description="A new name.")
    agent_user_group: AgentUserGroup | None = Field(default=None, description="Task identity.")
    checkpoint_storage_config: dict[str, Any] | None = Field(
        default=None, description="Checkpoint storage ({} clears it)."
    )
    default_compute_pool: str | None = Field(default=None, description="Default compute pool.")
    default_aux_pool: str | None = Field(default=None, description="Default aux pool.")
    default_compute_resource_pool: str | None = Field(
        default=None, description="Default compute pool (the CLI's spelling)."
    )
    default_aux_resource_pool: str | None = Field(
        default=None, description="Default aux pool (the CLI's spelling)."
    )


class PatchWorkspaceResponse(WireModel):
    """``v1PatchWorkspaceResponse``."""

    workspace: V1Workspace = Field(description="The workspace now.")
    namespace_bindings: dict[str, Any] = Field(
        default_factory=dict, description="Kubernetes namespace bindings (none)."
    )


class DeleteWorkspaceResponse(WireModel):
    """``v1DeleteWorkspaceResponse``: Stalwart deletes at once (``completed`` true)."""

    completed: bool = Field(description="Whether the deletion is finished.")
