"""Routes: unmanaged trials, the official SDK's detached mode (``core_v2`` with
``unmanaged=True``): ``POST`` / ``PUT /api/v1/trials``, ``POST /api/v1/trials/{id}/start``,
``PATCH /api/v1/trials/{id}`` (heartbeat and state); the script's output comes through the
legacy ``POST /task-logs`` (:mod:`stalwart.master.api.logs`). The rules are
:mod:`stalwart.master.services.unmanaged`'s; the unmanaged experiments themselves are created
by :mod:`stalwart.master.api.experiments`.
"""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master import policy
from stalwart.master.api.deps import Caller, CallerDep, SessionDep, StateDep
from stalwart.master.api.models.trials import (
    CreateTrialRequest,
    PatchTrialRequest,
    PutTrialRequest,
    StartTrialRequest,
    StartTrialResponse,
    TrialResponse,
)
from stalwart.master.api.trials import trial_to_wire
from stalwart.master.db.tables import Trial
from stalwart.master.services import experiments as experiments_svc
from stalwart.master.services import trials as trials_svc
from stalwart.master.services import unmanaged as svc

__all__ = ["router"]

router = APIRouter(tags=["unmanaged trials"])


def _wire(session: Session, trial: Trial) -> TrialResponse:
    return TrialResponse(trial=trial_to_wire(trials_svc.trial_views(session, [trial])[0]))


def _new_trial(
    request: CreateTrialRequest, caller: Caller, session: Session, external_id: str | None
) -> TrialResponse:
    if not request.unmanaged:
        raise InvalidArgumentError(
            "only unmanaged trials can be created from outside (the master creates the trials "
            "of its experiments)"
        )
    experiment = experiments_svc.get_experiment(session, request.experiment_id)
    policy.require_change_experiment(session, caller.user, experiment)
    return _wire(session, svc.new_trial(session, experiment, request.hparams, external_id))


@router.post("/trials", response_model=TrialResponse)
def create_trial(
    body: CreateTrialRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> TrialResponse:
    """A new PAUSED trial of an unmanaged experiment (400 for a managed one)."""
    answer = _new_trial(body, caller, session, None)
    state.hints.experiment(body.experiment_id)
    return answer


@router.put("/trials", response_model=TrialResponse)
def put_trial(
    body: PutTrialRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> TrialResponse:
    """The trial of an external trial id in an unmanaged experiment, created the first time."""
    answer = _new_trial(body.create_trial_request, caller, session, body.external_trial_id)
    state.hints.experiment(body.create_trial_request.experiment_id)
    return answer


@router.get(
    "/trials/by-external-id/{external_experiment_id}/{external_trial_id}",
    response_model=TrialResponse,
)
def get_trial_by_external_id(
    external_experiment_id: str, external_trial_id: str, caller: CallerDep, session: SessionDep
) -> TrialResponse:
    """The trial of an external trial id in the experiment of an external experiment id (404
    when there is none; 403 when the caller may not see its experiment)."""
    trial = svc.find_trial_by_external_ids(session, external_experiment_id, external_trial_id)
    if trial is None:
        raise NotFoundError(
            f"no trial of external id {external_trial_id!r} in an experiment of external id "
            f"{external_experiment_id!r}"
        )
    experiment = experiments_svc.get_experiment(session, trial.experiment_id)
    policy.require_view_experiment(session, caller.user, experiment)
    return _wire(session, trial)


@router.post("/trials/{trial_id}/start", response_model=StartTrialResponse)
def start_trial(
    trial_id: int,
    body: StartTrialRequest,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> StartTrialResponse:
    """Start a run of an unmanaged trial: its run id, and the checkpoint a restart resumes
    from (400 for a managed trial, and without ``resume`` for one started before)."""
    started = svc.start_trial(session, trial_id, resume=body.resume)
    state.hints.poke()
    return StartTrialResponse(
        trial_run_id=started.trial_run_id,
        steps_completed=started.steps_completed,
        latest_checkpoint=started.latest_checkpoint,
    )


@router.patch("/trials/{trial_id}", response_model=TrialResponse)
def patch_trial(
    trial_id: int,
    body: PatchTrialRequest,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> TrialResponse:
    """An unmanaged trial's heartbeat, with the state its script reports (``STATE_RUNNING``,
    ``STATE_COMPLETED``, ``STATE_ERROR``...); its experiment follows. 400 for a managed
    trial."""
    if body.trial_id is not None and body.trial_id != trial_id:
        raise InvalidArgumentError(
            f"the body's trialId ({body.trial_id}) is not the trial in the path ({trial_id})"
        )
    trial = svc.report_trial_state(session, trial_id, body.state)
    state.hints.poke()
    return _wire(session, trial)
