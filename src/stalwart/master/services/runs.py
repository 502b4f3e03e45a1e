"""Determined 0.38's flat "runs" (the web UI's run table, ``bindings.post_SearchRuns``,
``post_KillRuns`` & co.) on Stalwart's trials: a run is a trial, its project is its
experiment's.

Actions answer one :class:`~stalwart.master.services.experiment_bulk.ActionResult` per run
with Determined's messages. Stalwart keeps archiving and deleting on whole experiments, so
archiving, deleting or moving one run of a multi-trial experiment (and archiving or deleting
any single run) is answered per run with what to do instead; a run of a single-trial
experiment moves with its experiment, as in Determined.

Run filters (the UI's filter JSON) are accepted when they filter nothing but archived runs;
anything else is refused (400) with what to do instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from stalwart.errors import ForbiddenError, InvalidArgumentError, StalwartError
from stalwart.master import policy
from stalwart.master.api.models.common import paginate
from stalwart.master.db.tables import Experiment, Project, Trial, User, Workspace
from stalwart.master.services.experiment_bulk import ActionResult
from stalwart.master.services.trials import Page, TrialView, trial_views
from stalwart.master.transitions import TRIAL_TERMINAL

__all__ = [
    "RunFilter",
    "RunRow",
    "RunView",
    "parse_filter",
    "runs_query",
    "search_runs",
    "select_runs",
    "sort_columns",
]

_SORTABLE: dict[str, Any] = {
    "id": Trial.id,
    "startTime": Trial.start_time,
    "endTime": Trial.end_time,
    "state": Trial.state,
    "searcherMetricValue": Trial.searcher_metric_value,
    "experimentId": Trial.experiment_id,
    "experimentName": Experiment.name,
}


@dataclass(frozen=True)
class RunFilter:
    """What a run filter asks for that Stalwart serves: whether archived runs are shown."""

    show_archived: bool = True


def parse_filter(text: str | None) -> RunFilter:
    """The served part of a run filter (JSON: ``{"filterGroup": {...}, "showArchived": ...}``);
    400 when it filters on anything else or is not such JSON."""
    if not text:
        return RunFilter()
    try:
        data = json.loads(text)
    except ValueError:
        raise InvalidArgumentError(f"the run filter is not JSON: {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise InvalidArgumentError("the run filter must be a JSON object")
    group = data.get("filterGroup") or {}
    if not isinstance(group, dict) or group.get("children"):
        raise InvalidArgumentError(
            "Stalwart does not evaluate run filter conditions yet: leave the filter group "
            "empty and name the runs by id (runIds), or filter experiments instead"
        )
    return RunFilter(show_archived=bool(data.get("showArchived", True)))


def sort_columns(text: str | None) -> list[Any]:
    """ORDER BY of a run sort (``"startTime=desc,id=asc"``); ascending id when none. 400 for
    a column Stalwart cannot sort runs by."""
    if not text:
        return [Trial.id.asc()]
    out = []
    for part in text.split(","):
        name, _, direction = part.strip().partition("=")
        column = _SORTABLE.get(name)
        if column is None or direction not in ("asc", "desc", ""):
            raise InvalidArgumentError(
                f"cannot sort runs by {part!r}: sort by one of {', '.join(_SORTABLE)} "
                "followed by =asc or =desc"
            )
        out.append(column.desc() if direction == "desc" else column.asc())
    return [*out, Trial.id.asc()]


def runs_query(
    project_id: int | None, hidden_projects: Sequence[int], f: RunFilter
) -> Select[Trial, Experiment]:
    """Trials (with their experiment) of ``project_id`` (any when None) that the caller sees."""
    query: Select[Trial, Experiment] = select(Trial, Experiment).join(
        Experiment, Trial.experiment_id == Experiment.id
    )
    if project_id is not None:
        query = query.where(Experiment.project_id == project_id)
    if hidden_projects:
        query = query.where(Experiment.project_id.not_in(list(hidden_projects)))
    if not f.show_archived:
        query = query.where(Experiment.archived.is_(False))
    return query


def count(session: Session, query: Select[Trial, Experiment]) -> int:
    """How many rows ``query`` selects."""
    return int(session.scalar(select(func.count()).select_from(query.subquery())) or 0)


@dataclass(frozen=True)
class RunRow:
    """A run an action may touch: the trial, its experiment, and how many trials that has."""

    trial: Trial
    experiment: Experiment
    trials_in_experiment: int

    @property
    def multitrial(self) -> bool:
        """Whether the run's experiment searches more than one trial."""
        return self.experiment.searcher_type != "single" or self.trials_in_experiment > 1


def select_runs(
    session: Session, user: User, project_id: int | None, run_ids: Sequence[int]
) -> tuple[list[RunRow], list[ActionResult]]:
    """The named runs of ``project_id`` (any when None or 0) that ``user`` may change, and a
    not-found result for each other one (Determined's message)."""
    rows: list[RunRow] = []
    missing: list[ActionResult] = []
    for run_id in dict.fromkeys(run_ids):
        trial = session.get(Trial, run_id)
        experiment = session.get(Experiment, trial.experiment_id) if trial else None
        visible = trial is not None and experiment is not None
        if visible and project_id and experiment is not None:
            visible = experiment.project_id == project_id
        if visible and experiment is not None:
            try:
                policy.require_change_experiment(session, user, experiment)
            except ForbiddenError:
                visible = False
        if not visible or trial is None or experiment is None:
            where = f" in project with id '{project_id}'" if project_id else ""
            missing.append(ActionResult(run_id, f"Run with id '{run_id}' not found{where}"))
            continue
        siblings = session.scalar(
            select(func.count()).select_from(Trial).where(Trial.experiment_id == experiment.id)
        )
        rows.append(RunRow(trial, experiment, int(siblings or 0)))
    return rows, missing


def is_terminal(row: RunRow) -> bool:
    """Whether the run has ended."""
    return row.trial.state in TRIAL_TERMINAL


def attempt(
    session: Session, run_id: int, action: Callable[[], None], failure: str
) -> ActionResult:
    """Run ``action``; a refusal is rolled back and answered ``failure % message``."""
    try:
        action()
    except StalwartError as exc:
        session.rollback()
        return ActionResult(run_id, failure % exc)
    return ActionResult(run_id)


@dataclass(frozen=True)
class RunView:
    """A run as the run table shows it: the trial's view, its experiment, project and
    workspace."""

    trial: TrialView
    experiment: Experiment
    project: Project | None
    workspace: Workspace | None


def search_runs(
    session: Session,
    user: User,
    project_id: int | None,
    *,
    filter_text: str | None,
    sort: str | None,
    offset: int,
    limit: int,
) -> Page[RunView]:
    """A page of the runs ``user`` sees (of ``project_id`` when given; 404 for a project
    they cannot see is the caller's check), ordered by ``sort`` (:func:`sort_columns`)."""
    query = runs_query(
        project_id, policy.hidden_project_ids(session, user), parse_filter(filter_text)
    )
    total = count(session, query)
    start, end, pagination = paginate(total, offset, limit)
    rows = session.execute(query.order_by(*sort_columns(sort)).offset(start).limit(end - start))
    pairs = [(trial, experiment) for trial, experiment in rows]
    views = trial_views(session, [trial for trial, _ in pairs])
    out = []
    for view, (_, experiment) in zip(views, pairs, strict=True):
        project = session.get(Project, experiment.project_id)
        workspace = session.get(Workspace, project.workspace_id) if project else None
        out.append(RunView(view, experiment, project, workspace))
    return Page(items=out, pagination=pagination)
