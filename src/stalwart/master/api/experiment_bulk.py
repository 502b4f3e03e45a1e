"""Routes: actions on many experiments of a project at once (Determined's bulk experiment
actions, which the web UI and ``bindings.post_ActivateExperiments`` & co. send).

``POST /projects/{projectId}/experiments/{activate,pause,cancel,kill,archive,unarchive}`` and
``DELETE /projects/{projectId}/experiments/delete`` take ``{experimentIds, projectId,
filters?}`` and answer ``{results: [{id, error}]}``, one per experiment (an empty ``error``
means done); see :mod:`stalwart.master.services.experiment_bulk`. Project ``-1`` means every
project.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fastapi import APIRouter
from sqlalchemy.orm import Session

from stalwart.errors import StalwartError
from stalwart.master.api.deps import Caller, CallerDep, SessionDep, StateDep
from stalwart.master.api.models.projects import ExperimentActionResult
from stalwart.master.api.models.runs import BulkExperimentsRequest, BulkExperimentsResponse
from stalwart.master.db.tables import Experiment
from stalwart.master.services import experiment_bulk as bulk
from stalwart.master.services import experiments as svc
from stalwart.master.state import MasterState

__all__ = ["router"]

router = APIRouter(tags=["experiments"])


def _filters(body: BulkExperimentsRequest) -> bulk.BulkFilters | None:
    f = body.filters
    if f is None:
        return None
    return bulk.BulkFilters(
        archived=f.archived,
        description=f.description,
        excluded_ids=f.excluded_experiment_ids or (),
        labels=f.labels or (),
        name=f.name,
        project_id=f.project_id,
        states=f.states or (),
        user_ids=f.user_ids or (),
    )


def _answer(results: Sequence[bulk.ActionResult]) -> BulkExperimentsResponse:
    return BulkExperimentsResponse(
        results=[ExperimentActionResult(id=r.id, error=r.error) for r in results]
    )


def _state_action(
    project_id: int,
    body: BulkExperimentsRequest,
    caller: Caller,
    session: Session,
    state: MasterState,
    action: Callable[[Session, Experiment], svc.Signals],
    *,
    default_states: Sequence[str],
    terminal_error: str | None,
) -> BulkExperimentsResponse:
    """Pause, activate, cancel or kill the selected live experiments, each through the one
    door the single-experiment routes use."""
    chosen = bulk.select_experiments(
        session,
        caller.user,
        project_id,
        body.experiment_ids,
        _filters(body),
        default_states=default_states,
    )

    def act(experiment: Experiment) -> None:
        with state.lifecycle:
            session.refresh(experiment)
            signals = action(session, experiment)
            session.commit()
        svc.deliver(state.notifier, signals)
        state.hints.experiment(experiment.id)

    done = bulk.apply_each(session, chosen.experiments, act, terminal_error=terminal_error)
    return _answer(chosen.results + done)


_IN_TERMINAL = "experiment in terminal state"


def _state_route(
    verb: str,
    action: Callable[[Session, Experiment], svc.Signals],
    doc: str,
    *,
    default_states: Sequence[str],
    terminal_error: str | None,
) -> None:
    """Register ``POST /projects/{project_id}/experiments/<verb>`` (``<verb>_experiments``)."""

    def route(
        project_id: int,
        body: BulkExperimentsRequest,
        caller: CallerDep,
        session: SessionDep,
        state: StateDep,
    ) -> BulkExperimentsResponse:
        return _state_action(
            project_id,
            body,
            caller,
            session,
            state,
            action,
            default_states=default_states,
            terminal_error=terminal_error,
        )

    route.__name__ = route.__qualname__ = f"{verb}_experiments"
    route.__doc__ = doc
    path = f"/projects/{{project_id}}/experiments/{verb}"
    router.post(path, response_model=BulkExperimentsResponse)(route)


_state_route(
    "activate",
    svc.apply_activate,
    "Activate paused experiments (filters default to paused ones).",
    default_states=("PAUSED",),
    terminal_error=_IN_TERMINAL,
)
_state_route(
    "pause",
    svc.apply_pause,
    "Pause active experiments (filters default to active ones).",
    default_states=("ACTIVE",),
    terminal_error=_IN_TERMINAL,
)
_state_route(
    "cancel",
    svc.apply_cancel,
    "Cancel experiments (already ended ones count as done).",
    default_states=bulk.NON_TERMINAL,
    terminal_error=None,
)
_state_route(
    "kill",
    svc.apply_kill,
    "Kill experiments (already ended ones count as done).",
    default_states=bulk.NON_TERMINAL,
    terminal_error=None,
)


def _archive(
    project_id: int, body: BulkExperimentsRequest, caller: Caller, session: Session, archived: bool
) -> BulkExperimentsResponse:
    filters = _filters(body)
    if filters is not None:  # filters select only what can be done
        filters = bulk.BulkFilters(**{**filters.__dict__, "archived": not archived})
    chosen = bulk.select_experiments(
        session,
        caller.user,
        project_id,
        body.experiment_ids,
        filters,
        default_states=("COMPLETED", "CANCELED", "ERROR"),
        live_only=False,
    )
    done = bulk.apply_each(
        session,
        chosen.experiments,
        lambda e: svc.archive_experiment(session, e.id, archived),
        run_terminal=True,
    )
    return _answer(chosen.results + done)


@router.post("/projects/{project_id}/experiments/archive", response_model=BulkExperimentsResponse)
def archive_experiments(
    project_id: int, body: BulkExperimentsRequest, caller: CallerDep, session: SessionDep
) -> BulkExperimentsResponse:
    """Archive ended experiments (filters select unarchived, ended ones)."""
    return _archive(project_id, body, caller, session, True)


@router.post("/projects/{project_id}/experiments/unarchive", response_model=BulkExperimentsResponse)
def unarchive_experiments(
    project_id: int, body: BulkExperimentsRequest, caller: CallerDep, session: SessionDep
) -> BulkExperimentsResponse:
    """Unarchive archived experiments (filters select archived, ended ones)."""
    return _archive(project_id, body, caller, session, False)


@router.delete("/projects/{project_id}/experiments/delete", response_model=BulkExperimentsResponse)
def delete_experiments(
    project_id: int, body: BulkExperimentsRequest, caller: CallerDep, session: SessionDep
) -> BulkExperimentsResponse:
    """Delete ended experiments with everything recorded about them (filters select ended
    ones); one with checkpoints in the model registry is refused, as alone."""
    chosen = bulk.select_experiments(
        session,
        caller.user,
        project_id,
        body.experiment_ids,
        _filters(body),
        default_states=("COMPLETED", "CANCELED", "ERROR"),
        live_only=False,
    )
    ids = [e.id for e in chosen.experiments]
    results = list(chosen.results)
    for experiment_id in ids:
        try:
            svc.delete_experiment(session, caller.user, experiment_id)
        except StalwartError as exc:
            session.rollback()
            results.append(bulk.ActionResult(experiment_id, str(exc)))
            continue
        results.append(bulk.ActionResult(experiment_id))
    return _answer(results)
