"""Routes: projects (``/api/v1/projects/...``, ``/api/v1/workspaces/{id}/projects``) and moving
experiments between them; the rules are :mod:`stalwart.master.services.projects`'.

A project in a workspace where the caller has no role answers 404, as an unknown one does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from stalwart.errors import StalwartError
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.models.common import Empty, paginate, wire_time
from stalwart.master.api.models.projects import (
    DeleteProjectResponse,
    ExperimentActionResult,
    GetProjectResponse,
    GetWorkspaceProjectsResponse,
    MoveExperimentRequest,
    MoveExperimentsRequest,
    MoveExperimentsResponse,
    MoveProjectRequest,
    Note,
    NotesResponse,
    PatchProjectRequest,
    PostProjectRequest,
    ProjectResponse,
    PutProjectNotesRequest,
    V1Project,
)
from stalwart.master.services import projects as svc

__all__ = ["project_to_wire", "router"]

router = APIRouter(tags=["projects"])

_SORTS = {
    "SORT_BY_NAME": "name",
    "SORT_BY_DESCRIPTION": "description",
    "SORT_BY_CREATION_TIME": "creation_time",
    "SORT_BY_LAST_EXPERIMENT_START_TIME": "last_experiment",
}


def project_to_wire(view: svc.ProjectView) -> V1Project:
    """The ``v1Project`` of a project."""
    p = view.project
    return V1Project(
        id=p.id,
        name=p.name,
        key=p.key or "",
        description=p.description or "",
        workspace_id=p.workspace_id,
        workspace_name=view.workspace.name,
        archived=view.archived,
        immutable=p.immutable,
        notes=[Note(name=n["name"], contents=n["contents"]) for n in p.notes or []],
        num_active_experiments=view.num_active_experiments,
        num_experiments=view.num_experiments,
        num_runs=view.num_runs,
        state="WORKSPACE_STATE_UNSPECIFIED",
        user_id=p.user_id or 0,
        username=view.username,
        last_experiment_started_at=wire_time(view.last_experiment_started_at),
    )


@router.get("/workspaces/{workspace_id}/projects", response_model=GetWorkspaceProjectsResponse)
def get_workspace_projects(
    workspace_id: int,
    caller: CallerDep,
    session: SessionDep,
    name: str | None = None,
    archived: bool | None = None,
    users: Annotated[list[str] | None, Query()] = None,
    user_ids: Annotated[list[int] | None, Query(alias="userIds")] = None,
    sort_by: Annotated[str, Query(alias="sortBy")] = "SORT_BY_UNSPECIFIED",
    order_by: Annotated[str, Query(alias="orderBy")] = "ORDER_BY_UNSPECIFIED",
    offset: int = 0,
    limit: Annotated[int, Query(ge=0)] = 0,
) -> GetWorkspaceProjectsResponse:
    """A workspace's projects (``name``: exact); workspace 0: every visible project."""
    views = svc.list_projects(
        session,
        caller.user,
        workspace_id,
        name=name,
        archived=archived,
        users=users or (),
        user_ids=user_ids or (),
        sort_by=_SORTS.get(sort_by, "id"),
        descending=order_by == "ORDER_BY_DESC",
    )
    start, end, page = paginate(len(views), offset, limit)
    return GetWorkspaceProjectsResponse(
        projects=[project_to_wire(v) for v in views[start:end]], pagination=page
    )


@router.post("/workspaces/{workspace_id}/projects", response_model=ProjectResponse)
def post_project(
    workspace_id: int, body: PostProjectRequest, caller: CallerDep, session: SessionDep
) -> ProjectResponse:
    """Create a project (members of the workspace)."""
    view = svc.create_project(
        session,
        caller.user,
        workspace_id,
        body.name,
        description=body.description,
        key=body.key,
    )
    return ProjectResponse(project=project_to_wire(view))


@router.get("/projects/key/{key}", response_model=GetProjectResponse)
def get_project_by_key(key: str, caller: CallerDep, session: SessionDep) -> GetProjectResponse:
    """The project with this key (any case)."""
    return GetProjectResponse(
        project=project_to_wire(svc.get_project_by_key(session, caller.user, key))
    )


@router.get("/projects/{project_id}", response_model=GetProjectResponse)
def get_project(project_id: int, caller: CallerDep, session: SessionDep) -> GetProjectResponse:
    """One project (404 when unknown or not visible)."""
    return GetProjectResponse(
        project=project_to_wire(svc.get_project(session, caller.user, project_id))
    )


@router.patch("/projects/{project_id}", response_model=ProjectResponse)
def patch_project(
    project_id: int, body: PatchProjectRequest, caller: CallerDep, session: SessionDep
) -> ProjectResponse:
    """Rename, describe or re-key a project."""
    change = svc.ProjectChange(name=body.name, description=body.description, key=body.key)
    view = svc.patch_project(session, caller.user, project_id, change)
    return ProjectResponse(project=project_to_wire(view))


@router.delete("/projects/{project_id}", response_model=DeleteProjectResponse)
def delete_project(
    project_id: int, caller: CallerDep, session: SessionDep
) -> DeleteProjectResponse:
    """Delete a project that holds no experiment."""
    svc.delete_project(session, caller.user, project_id)
    return DeleteProjectResponse(completed=True)


@router.post("/projects/{project_id}/archive", response_model=Empty)
def archive_project(project_id: int, caller: CallerDep, session: SessionDep) -> Empty:
    """Archive a project."""
    svc.set_archived(session, caller.user, project_id, True)
    return Empty()


@router.post("/projects/{project_id}/unarchive", response_model=Empty)
def unarchive_project(project_id: int, caller: CallerDep, session: SessionDep) -> Empty:
    """Unarchive a project."""
    svc.set_archived(session, caller.user, project_id, False)
    return Empty()


def _notes(notes: list[dict[str, str]]) -> NotesResponse:
    return NotesResponse(notes=[Note(name=n["name"], contents=n["contents"]) for n in notes])


@router.put("/projects/{project_id}/notes", response_model=NotesResponse)
def put_project_notes(
    project_id: int, body: PutProjectNotesRequest, caller: CallerDep, session: SessionDep
) -> NotesResponse:
    """Replace a project's notes."""
    notes = [n.model_dump() for n in body.notes]
    return _notes(svc.set_notes(session, caller.user, project_id, notes))


@router.post("/projects/{project_id}/notes", response_model=NotesResponse)
def add_project_note(
    project_id: int, body: Note, caller: CallerDep, session: SessionDep
) -> NotesResponse:
    """Append a note to a project."""
    return _notes(svc.add_note(session, caller.user, project_id, body.model_dump()))


@router.post("/projects/{project_id}/move", response_model=Empty)
def move_project(
    project_id: int, body: MoveProjectRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """Move a project (and its experiments) to another workspace."""
    svc.move_project(session, caller.user, project_id, body.destination_workspace_id)
    return Empty()


@router.post("/experiments/{experiment_id}/move", response_model=Empty)
def move_experiment(
    experiment_id: int, body: MoveExperimentRequest, caller: CallerDep, session: SessionDep
) -> Empty:
    """Move an experiment to another project (changing it here, creating there)."""
    svc.move_experiment(session, caller.user, experiment_id, body.destination_project_id)
    return Empty()


@router.post("/projects/{project_id}/experiments/move", response_model=MoveExperimentsResponse)
def move_experiments(
    project_id: int, body: MoveExperimentsRequest, caller: CallerDep, session: SessionDep
) -> MoveExperimentsResponse:
    """Move several experiments of project ``project_id``; one result each."""
    svc.get_project(session, caller.user, project_id)
    results = []
    for exp_id in body.experiment_ids:
        error = ""
        try:
            svc.move_experiment(
                session,
                caller.user,
                exp_id,
                body.destination_project_id,
                from_project=project_id,
            )
        except StalwartError as exc:
            session.rollback()
            error = str(exc)
        results.append(ExperimentActionResult(error=error, id=exp_id))
    return MoveExperimentsResponse(results=results)
