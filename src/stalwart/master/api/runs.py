"""Routes: Determined 0.38's flat runs (``POST /runs`` search, ``POST /runs/{kill,pause,
resume,archive,unarchive,delete,move}``), served on trials; see
:mod:`stalwart.master.services.runs`. Each action answers ``{results: [{id, error}]}``, one
per run (an empty ``error`` means done).
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError
from stalwart.master.api.deps import CallerDep, SessionDep, StateDep
from stalwart.master.api.models.runs import (
    MoveRunsRequest,
    RunActionResult,
    RunsRequest,
    RunsResponse,
    SearchRunsRequest,
    SearchRunsResponse,
)
from stalwart.master.api.wire.runs import flat_run
from stalwart.master.services import experiments as exp_svc
from stalwart.master.services import projects as project_svc
from stalwart.master.services import runs as svc
from stalwart.master.services.experiment_bulk import ActionResult
from stalwart.master.state import MasterState

__all__ = ["router"]

router = APIRouter(tags=["runs"])


def _answer(results: Sequence[ActionResult]) -> RunsResponse:
    return RunsResponse(results=[RunActionResult(id=r.id, error=r.error) for r in results])


def _by_ids(filter_text: str | None, run_ids: Sequence[int]) -> None:
    """Runs are named by id; a filter is refused unless it filters nothing (Determined also
    refuses a filter with ids)."""
    if filter_text and run_ids:
        raise InvalidArgumentError("if filter is provided run id list must be empty")
    if filter_text:
        svc.parse_filter(filter_text)
        raise InvalidArgumentError(
            "Stalwart acts on runs named by id: send runIds, not a filter (search the runs "
            "with POST /api/v1/runs first)"
        )


@router.post("/runs", response_model=SearchRunsResponse)
def search_runs(
    body: SearchRunsRequest, caller: CallerDep, session: SessionDep
) -> SearchRunsResponse:
    """A page of runs (of ``projectId``; every visible one without it), ascending id unless
    ``sort`` says otherwise (``"startTime=desc"``...). 404 for a project the caller cannot
    see."""
    if body.project_id is not None:
        project_svc.get_project(session, caller.user, body.project_id)
    page = svc.search_runs(
        session,
        caller.user,
        body.project_id,
        filter_text=body.filter,
        sort=body.sort,
        offset=body.offset,
        limit=body.limit,
    )
    return SearchRunsResponse(pagination=page.pagination, runs=[flat_run(r) for r in page.items])


@router.post("/runs/kill", response_model=RunsResponse)
def kill_runs(
    body: RunsRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> RunsResponse:
    """Kill runs (ended ones count as done)."""
    _by_ids(body.filter, body.run_ids)
    rows, results = svc.select_runs(session, caller.user, body.project_id, body.run_ids)
    for row in rows:
        run_id = row.trial.id
        if svc.is_terminal(row):
            results.append(ActionResult(run_id))
            continue

        def kill(run_id: int = run_id) -> None:
            with state.lifecycle:
                signals = exp_svc.kill_trial(session, run_id)
            exp_svc.deliver(state.notifier, signals)
            state.hints.poke()

        results.append(svc.attempt(session, run_id, kill, "Failed to kill run: %s"))
    return _answer(results)


def _pause_resume(
    body: RunsRequest, caller: CallerDep, session: Session, state: MasterState, pause: bool
) -> RunsResponse:
    _by_ids(body.filter, body.run_ids)
    rows, results = svc.select_runs(session, caller.user, body.project_id, body.run_ids)
    action = exp_svc.apply_pause if pause else exp_svc.apply_activate
    failure = f"Failed to {'pause' if pause else 'resume'} associated experiment: %s"
    for row in rows:
        run_id = row.trial.id
        if row.experiment.archived:
            results.append(ActionResult(run_id, "Run is archived."))
            continue
        if row.multitrial:
            results.append(
                ActionResult(run_id, f"Cannot pause/unpause run '{run_id}' (part of multi-trial).")
            )
            continue
        experiment_id = row.experiment.id

        def act(experiment_id: int = experiment_id) -> None:
            with state.lifecycle:
                experiment = exp_svc.get_experiment(session, experiment_id)
                signals = action(session, experiment)
                session.commit()
            exp_svc.deliver(state.notifier, signals)
            state.hints.experiment(experiment_id)

        results.append(svc.attempt(session, run_id, act, failure))
    return _answer(results)


@router.post("/runs/pause", response_model=RunsResponse)
def pause_runs(
    body: RunsRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> RunsResponse:
    """Pause runs by pausing their single-trial experiments."""
    return _pause_resume(body, caller, session, state, True)


@router.post("/runs/resume", response_model=RunsResponse)
def resume_runs(
    body: RunsRequest, caller: CallerDep, session: SessionDep, state: StateDep
) -> RunsResponse:
    """Resume runs by activating their single-trial experiments."""
    return _pause_resume(body, caller, session, state, False)


def _whole_experiments(
    body: RunsRequest, caller: CallerDep, session: Session, verb: str
) -> RunsResponse:
    """Archive, unarchive or delete: answered per run (Stalwart does these on experiments)."""
    _by_ids(body.filter, body.run_ids)
    rows, results = svc.select_runs(session, caller.user, body.project_id, body.run_ids)
    for row in rows:
        run_id = row.trial.id
        exp_id = row.experiment.id
        if verb != "delete" and row.experiment.archived:
            error = f"Run is part of archived Search (id: '{exp_id}')."
        elif not svc.is_terminal(row):
            error = "Run is not in a terminal state."
        else:
            error = (
                f"Stalwart cannot {verb} a single run: {verb} its experiment {exp_id} instead "
                f"(det experiment {verb} {exp_id})"
            )
        results.append(ActionResult(run_id, error))
    return _answer(results)


@router.post("/runs/archive", response_model=RunsResponse)
def archive_runs(body: RunsRequest, caller: CallerDep, session: SessionDep) -> RunsResponse:
    """Answered per run: archive the experiment instead."""
    return _whole_experiments(body, caller, session, "archive")


@router.post("/runs/unarchive", response_model=RunsResponse)
def unarchive_runs(body: RunsRequest, caller: CallerDep, session: SessionDep) -> RunsResponse:
    """Answered per run: unarchive the experiment instead."""
    return _whole_experiments(body, caller, session, "unarchive")


@router.post("/runs/delete", response_model=RunsResponse)
def delete_runs(body: RunsRequest, caller: CallerDep, session: SessionDep) -> RunsResponse:
    """Answered per run: delete the experiment instead."""
    return _whole_experiments(body, caller, session, "delete")


@router.post("/runs/move", response_model=RunsResponse)
def move_runs(body: MoveRunsRequest, caller: CallerDep, session: SessionDep) -> RunsResponse:
    """Move runs of single-trial experiments to another project, with their experiment (as
    Determined does); a run of a multi-trial experiment is skipped with
    ``skipMultitrial``, otherwise answered with what to do instead."""
    _by_ids(body.filter, body.run_ids)
    rows, results = svc.select_runs(session, caller.user, body.source_project_id, body.run_ids)
    for row in rows:
        run_id = row.trial.id
        exp_id = row.experiment.id
        if row.multitrial:
            if not body.skip_multitrial:
                results.append(
                    ActionResult(
                        run_id,
                        f"Stalwart moves whole experiments: run {run_id} is one of the trials "
                        f"of experiment {exp_id}; move the experiment instead",
                    )
                )
            continue

        def move(exp_id: int = exp_id) -> None:
            project_svc.move_experiment(
                session,
                caller.user,
                exp_id,
                body.destination_project_id,
                from_project=body.source_project_id,
            )

        results.append(svc.attempt(session, run_id, move, "Failed to move run: %s"))
    return _answer(results)
