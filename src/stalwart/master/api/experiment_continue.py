"""Route: ``POST /api/v1/experiments/continue`` (``det e continue ID [--config ...]``).

The logic is :mod:`stalwart.master.services.experiment_continue`'s; this router takes the
state lock (the cluster loop must not settle or collect the experiment meanwhile), commits,
and wakes the loop so that the continued trial gets an allocation at once.
"""

from __future__ import annotations

from fastapi import APIRouter

from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.experiments import experiment_wire
from stalwart.master.api.models.experiments import (
    ContinueExperimentRequest,
    ContinueExperimentResponse,
)
from stalwart.master.rm.base import EnginePools
from stalwart.master.services import experiments as experiments_svc
from stalwart.master.services.experiment_continue import continue_experiment

__all__ = ["router"]

router = APIRouter(tags=["experiments"])


@router.post("/experiments/continue", response_model=ContinueExperimentResponse)
def post_continue_experiment(
    body: ContinueExperimentRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> ContinueExperimentResponse:
    """Continue a finished single-trial experiment from its latest checkpoint, with the
    override config merged over its config (400 when it may not be; 403 for a caller who may
    not change it or the fields changed)."""
    with state.lifecycle:
        continued = continue_experiment(session, caller.user, body.id, body.override_config)
        if isinstance(state.rm, EnginePools):
            state.rm.check_pool(continued.experiment.resource_pool)
        session.commit()
    state.hints.experiment(body.id)
    state.hints.poke()
    return ContinueExperimentResponse(
        experiment=experiment_wire(experiments_svc.experiment_view(session, body.id))
    )
