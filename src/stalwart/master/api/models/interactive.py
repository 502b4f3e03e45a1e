"""Wire models of interactive tasks: ``v1Command``, ``v1Notebook``, ``v1Shell``,
``v1Tensorboard``, their launch requests and answers, and generic tasks.

One model, :class:`V1InteractiveTask`, serves the four kinds: the fields a kind does not have
are left out of its answers (``exclude_none`` on the optional ones is not used; the client
ignores unknown keys and reads the required ones with ``obj["key"]``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import WireModel, WireRequest
from stalwart.master.api.models.experiments import V1File

__all__ = [
    "CreateGenericTaskRequest",
    "CreateGenericTaskResponse",
    "GetInteractiveTaskResponse",
    "LaunchRequest",
    "ReportIdleRequest",
    "V1InteractiveTask",
    "V1TaskContainer",
]


class V1TaskContainer(WireModel):
    """``v1Container``: REQUIRED id, state."""

    id: str = Field(description="The container id.")
    state: str = Field(description="containerv1State, e.g. STATE_RUNNING.")
    devices: list[dict[str, Any]] = Field(default_factory=list, description="Its devices.")


class V1InteractiveTask(WireModel):
    """``v1Command`` / ``v1Notebook`` / ``v1Shell`` / ``v1Tensorboard``: REQUIRED id,
    description, state, startTime, username, resourcePool, jobId, workspaceId."""

    id: str = Field(description="The task id (a UUID).")
    description: str = Field(description="The task's description.")
    state: str = Field(description="taskv1State, e.g. STATE_RUNNING.")
    start_time: str = Field(description="When it was launched (RFC 3339).")
    username: str = Field(description="Its owner.")
    user_id: int | None = Field(default=None, description="Its owner's id.")
    display_name: str | None = Field(default=None, description="Its owner's display name.")
    resource_pool: str = Field(description="The pool it runs in.")
    job_id: str = Field(description="Its job id (the task id).")
    workspace_id: int = Field(description="Its workspace.")
    exit_status: str | None = Field(default=None, description="How it ended (once it has).")
    container: V1TaskContainer | None = Field(default=None, description="Its container.")
    service_address: str | None = Field(
        default=None, description="Notebooks and TensorBoards: the path under the master."
    )
    private_key: str | None = Field(default=None, description="Shells: the owner's key.")
    public_key: str | None = Field(default=None, description="Shells: the task's key.")
    agent_user_group: dict[str, Any] | None = Field(
        default=None, description="Shells: the OS user to ssh in as (`user`)."
    )
    addresses: list[dict[str, Any]] | None = Field(default=None, description="Shells.")
    experiment_ids: list[int] | None = Field(default=None, description="TensorBoards.")
    trial_ids: list[int] | None = Field(default=None, description="TensorBoards.")


class LaunchRequest(WireRequest):
    """``v1Launch{Command,Notebook,Shell,Tensorboard}Request``."""

    config: dict[str, Any] | None = Field(default=None, description="The task config.")
    template_name: str | None = Field(default=None, description="A config template.")
    files: list[V1File] | None = Field(default=None, description="Files (-c / -i).")
    workspace_id: int | None = Field(default=None, description="Its workspace (default 1).")
    data: str | None = Field(default=None, description="Accepted and ignored.")
    preview: bool | None = Field(default=None, description="Only check and show the config.")
    experiment_ids: list[int] | None = Field(default=None, description="TensorBoards.")
    trial_ids: list[int] | None = Field(default=None, description="TensorBoards.")


class GetInteractiveTaskResponse(WireModel):
    """``v1Get<Kind>Response`` / ``v1Launch<Kind>Response``: the task under its kind's key
    (``command``, ``notebook``, ``shell``, ``tensorboard``) and its config."""

    model_config = {"extra": "allow"}

    config: dict[str, Any] = Field(description="The task's config.")
    warnings: list[str] = Field(default_factory=list, description="Launch warnings.")


class ReportIdleRequest(WireRequest):
    """``PUT /api/v1/notebooks/{id}/report_idle``."""

    idle: bool = Field(description="Whether the notebook is idle now.")


class CreateGenericTaskRequest(WireRequest):
    """``v1CreateGenericTaskRequest`` (``det task create``)."""

    config: str = Field(description="The task config as YAML text.")
    context_directory: list[V1File] | None = Field(default=None, description="Its files.")
    project_id: int | None = Field(default=None, description="Its project (its workspace).")
    forked_from: str | None = Field(default=None, description="The task it was forked from.")
    parent_id: str | None = Field(default=None, description="Its parent task.")
    inherit_context: bool | None = Field(default=None, description="Use the parent's files.")
    no_pause: bool | None = Field(default=None, description="Accepted.")


class CreateGenericTaskResponse(WireModel):
    """``v1CreateGenericTaskResponse``: REQUIRED taskId."""

    task_id: str = Field(description="The new task.")
    warnings: list[str] = Field(default_factory=list, description="Launch warnings.")
