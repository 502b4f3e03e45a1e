"""Routes: log retention (``det task cleanup-logs``, ``det e|t set log-retention``, the web UI's
bulk form and remaining days); semantics in :mod:`stalwart.master.services.log_retention`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import Field

from stalwart.errors import NotFoundError, StalwartError
from stalwart.master import policy
from stalwart.master.api.deps import Caller, CallerDep, SessionDep, StateDep, require_admin
from stalwart.master.api.models.common import Empty, Int64Str, WireModel, WireRequest
from stalwart.master.api.models.projects import ExperimentActionResult
from stalwart.master.db.tables import Experiment
from stalwart.master.services import log_retention as service
from stalwart.master.services import projects as project_service

__all__ = ["router"]

router = APIRouter(tags=["logs"])

AdminDep = Annotated[Caller, Depends(require_admin)]


class CleanupLogsResponse(WireModel):
    """``v1CleanupLogsResponse``."""

    removed_count: Int64Str = Field(description="Log lines deleted.")


class RetainLogsRequest(WireRequest):
    """``v1PutExperimentRetainLogsRequest`` / ``v1PutTrialRetainLogsRequest``."""

    num_days: int = Field(description="Days to keep the logs after the end; -1: forever.")


class RetainLogsBulkRequest(WireRequest):
    """``v1PutExperimentsRetainLogsRequest`` (filters are not supported: name the experiments)."""

    experiment_ids: list[int] = Field(default_factory=list, description="The experiments.")
    num_days: int = Field(description="Days to keep the logs after the end; -1: forever.")


class RetainLogsBulkResponse(WireModel):
    """``v1PutExperimentsRetainLogsResponse``."""

    results: list[ExperimentActionResult] = Field(description="One per experiment.")


class RemainingDaysResponse(WireModel):
    """``v1GetTrialRemainingLogRetentionDaysResponse``: unset while the trial runs."""

    remaining_days: int | None = Field(
        default=None, description="Days left; -1 forever; 0 expired."
    )


@router.post("/cleanup_logs", response_model=CleanupLogsResponse)
def cleanup_logs(_admin: AdminDep, session: SessionDep, state: StateDep) -> CleanupLogsResponse:
    """Delete the expired trial logs now (admins: Determined asks for master-config rights)."""
    removed = service.cleanup_logs(session, state.settings.retention_policy.log_retention_days)
    session.commit()
    return CleanupLogsResponse(removed_count=removed)


@router.put("/experiments/{experiment_id}/retain_logs", response_model=Empty)
def retain_experiment_logs(
    experiment_id: int, body: RetainLogsRequest, _caller: CallerDep, session: SessionDep
) -> Empty:
    """Keep the experiment's trials' logs ``numDays`` after they end (-1: forever)."""
    service.set_experiment_retention(session, experiment_id, body.num_days)
    session.commit()
    return Empty()


@router.put("/trials/{trial_id}/retain_logs", response_model=Empty)
def retain_trial_logs(
    trial_id: int, body: RetainLogsRequest, _caller: CallerDep, session: SessionDep
) -> Empty:
    """Keep one trial's logs ``numDays`` after it ends (-1: forever)."""
    service.set_trial_retention(session, trial_id, body.num_days)
    session.commit()
    return Empty()


@router.get("/trials/{trial_id}/remaining_log_retention_days", response_model=RemainingDaysResponse)
def remaining_log_retention_days(
    trial_id: int, _caller: CallerDep, session: SessionDep, state: StateDep
) -> RemainingDaysResponse:
    """Days before the trial's logs may be deleted."""
    days = service.remaining_days(
        session, trial_id, state.settings.retention_policy.log_retention_days
    )
    return RemainingDaysResponse(remaining_days=days)


@router.put("/projects/{project_id}/experiments/retain_logs", response_model=RetainLogsBulkResponse)
def retain_project_experiments_logs(
    project_id: int, body: RetainLogsBulkRequest, caller: CallerDep, session: SessionDep
) -> RetainLogsBulkResponse:
    """Set the retention of several experiments of project ``project_id``; one result each
    (an experiment the caller may not change, or of another project, answers not found)."""
    service.validate_days(body.num_days)
    project_service.get_project(session, caller.user, project_id)
    results = []
    for exp_id in body.experiment_ids:
        error = ""
        try:
            experiment = session.get(Experiment, exp_id)
            if experiment is None or experiment.project_id != project_id:
                raise NotFoundError(f"experiment {exp_id} not found in project {project_id}")
            policy.require_change_experiment(session, caller.user, experiment)
            service.set_experiment_retention(session, exp_id, body.num_days)
            session.commit()
        except StalwartError as exc:
            session.rollback()
            error = str(exc)
        results.append(ExperimentActionResult(error=error, id=exp_id))
    return RetainLogsBulkResponse(results=results)
