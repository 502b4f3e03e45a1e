"""Routes: reading workspaces (``GET /api/v1/workspaces``, ``GET /api/v1/workspaces/{id}``).

The official client resolves workspace names through the list (``det cmd list``, ``det
notebook list``, ``-w NAME``). A caller sees the workspaces where their role is viewer or more
(:mod:`stalwart.master.policy`). Creating and changing workspaces is not served yet.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stalwart.errors import NotFoundError
from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import paginate
from stalwart.master.api.models.workspaces import (
    GetWorkspaceResponse,
    GetWorkspacesResponse,
    V1Workspace,
)
from stalwart.master.db.tables import Experiment, Project, User, Workspace

__all__ = ["router"]

router = APIRouter(tags=["workspaces"])


def _wire(session: Session, workspace: Workspace) -> V1Workspace:
    owner = session.get(User, workspace.user_id) if workspace.user_id is not None else None
    projects = select(Project.id).where(Project.workspace_id == workspace.id)
    return V1Workspace(
        id=workspace.id,
        name=workspace.name,
        archived=workspace.archived,
        username=owner.username if owner is not None else "",
        user_id=owner.id if owner is not None else 0,
        immutable=workspace.immutable,
        num_projects=session.scalar(select(func.count()).select_from(projects.subquery())) or 0,
        num_experiments=session.scalar(
            select(func.count()).where(Experiment.project_id.in_(projects))
        )
        or 0,
        pinned=False,
        state="WORKSPACE_STATE_UNSPECIFIED",
        error_message="",
    )


@router.get("/workspaces", response_model=GetWorkspacesResponse)
def get_workspaces(
    caller: CallerDep,
    session: SessionDep,
    name: str | None = None,
    name_case_sensitive: Annotated[str | None, Query(alias="nameCaseSensitive")] = None,
    archived: bool | None = None,
    offset: int = 0,
    limit: Annotated[int, Query(ge=0)] = 0,
) -> GetWorkspacesResponse:
    """The workspaces the caller may see, by id (``name``: exact, case-insensitive;
    ``nameCaseSensitive``: exact)."""
    query = select(Workspace).order_by(Workspace.id)
    if name is not None:
        query = query.where(func.lower(Workspace.name) == name.lower())
    if name_case_sensitive is not None:
        query = query.where(Workspace.name == name_case_sensitive)
    if archived is not None:
        query = query.where(Workspace.archived.is_(archived))
    visible = [
        w
        for w in session.scalars(query)
        if policy.workspace_role(session, caller.user, w.id) >= policy.Role.VIEWER
    ]
    start, end, page = paginate(len(visible), offset, limit)
    return GetWorkspacesResponse(
        workspaces=[_wire(session, w) for w in visible[start:end]], pagination=page
    )


@router.get("/workspaces/{workspace_id}", response_model=GetWorkspaceResponse)
def get_workspace(
    workspace_id: int, caller: CallerDep, session: SessionDep
) -> GetWorkspaceResponse:
    """One workspace (404 when unknown or not visible to the caller)."""
    workspace = session.get(Workspace, workspace_id)
    if workspace is None or policy.workspace_role(session, caller.user, workspace_id) < (
        policy.Role.VIEWER
    ):
        raise NotFoundError(f"workspace {workspace_id} not found")
    return GetWorkspaceResponse(workspace=_wire(session, workspace))
