"""Routes: experiments."""

from __future__ import annotations

from fastapi import APIRouter

from stalwart.errors import InvalidArgumentError
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.experiments import (
    CreateExperimentRequest,
    CreateExperimentResponse,
    experiment_to_wire,
)
from stalwart.master.db.tables import Project
from stalwart.master.services.experiment_create import create_experiment

__all__ = ["router"]

router = APIRouter(tags=["experiments"])


@router.post("/experiments", response_model=CreateExperimentResponse)
def post_experiment(
    body: CreateExperimentRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> CreateExperimentResponse:
    """Create an experiment from YAML text and a model definition (400 if invalid)."""
    if body.unmanaged:
        raise InvalidArgumentError("unmanaged experiments are not supported by Stalwart")
    if body.template:
        raise InvalidArgumentError(
            f"config template {body.template!r} not found (templates are not supported yet)"
        )
    created = create_experiment(
        session,
        state.settings,
        caller.user,
        config_text=body.config,
        model_definition=[f.model_dump() for f in body.model_definition],
        activate=body.activate,
        project_id=body.project_id,
        parent_id=body.parent_id,
        validate_only=body.validate_only,
    )
    exp = created.experiment
    project = session.get(Project, exp.project_id)
    wire = experiment_to_wire(
        exp,
        num_trials=0,
        username=caller.user.username,
        project_owner_id=(project.user_id if project and project.user_id else 1),
        project_name=project.name if project else None,
        workspace_id=project.workspace_id if project else None,
    )
    return CreateExperimentResponse(experiment=wire, config=exp.config)
