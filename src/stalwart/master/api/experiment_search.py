"""Route: ``POST /experiments-search`` (Determined's ``SearchExperiments``: the web UI's
experiment table and ``bindings.post_SearchExperiments``): a page of experiments, each with
its best trial.

``projectId`` narrows to one project (404 when the caller cannot see it); the filter is
accepted when it filters nothing but archived experiments (as for runs,
:func:`stalwart.master.services.runs.parse_filter`); ``sort`` is one column and a direction
(``"startTime=desc"``, optionally followed by ``id``), ascending id when absent.
"""

from __future__ import annotations

from fastapi import APIRouter

from stalwart.errors import InvalidArgumentError
from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.experiments import experiment_wire
from stalwart.master.api.models.experiment_details import (
    SearchExperimentExperiment,
    SearchExperimentsRequest,
    SearchExperimentsResponse,
)
from stalwart.master.api.trials import trial_to_wire
from stalwart.master.services import experiment_details as details
from stalwart.master.services import experiments as svc
from stalwart.master.services import projects as project_svc
from stalwart.master.services.runs import parse_filter

__all__ = ["router"]

router = APIRouter(tags=["experiments"])

_SORTS = {
    "id": "SORT_BY_ID",
    "name": "SORT_BY_NAME",
    "description": "SORT_BY_DESCRIPTION",
    "startTime": "SORT_BY_START_TIME",
    "endTime": "SORT_BY_END_TIME",
    "state": "SORT_BY_STATE",
    "numTrials": "SORT_BY_NUM_TRIALS",
    "progress": "SORT_BY_PROGRESS",
    "user": "SORT_BY_USER",
    "forkedFrom": "SORT_BY_FORKED_FROM",
    "resourcePool": "SORT_BY_RESOURCE_POOL",
    "projectId": "SORT_BY_PROJECT_ID",
    "checkpointSize": "SORT_BY_CHECKPOINT_SIZE",
    "checkpointCount": "SORT_BY_CHECKPOINT_COUNT",
    "searcherMetricsVal": "SORT_BY_SEARCHER_METRIC_VAL",
}


def _sort(text: str | None) -> tuple[str, bool]:
    """``(sort_by, descending)`` of a sort text; 400 for what Stalwart cannot sort by."""
    if not text:
        return "SORT_BY_ID", False
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) > 1 and not all(p.startswith("id=") for p in parts[1:]):
        raise InvalidArgumentError(
            f"Stalwart sorts experiments by one column (then id), not {text!r}"
        )
    name, _, direction = parts[0].partition("=")
    if name not in _SORTS or direction not in ("asc", "desc", ""):
        raise InvalidArgumentError(
            f"cannot sort experiments by {parts[0]!r}: use one of {', '.join(_SORTS)} "
            "followed by =asc or =desc"
        )
    return _SORTS[name], direction == "desc"


@router.post("/experiments-search", response_model=SearchExperimentsResponse)
def search_experiments(
    body: SearchExperimentsRequest, caller: CallerDep, session: SessionDep
) -> SearchExperimentsResponse:
    """A page of experiments with their best trials (see the module docstring)."""
    if body.project_id is not None:
        project_svc.get_project(session, caller.user, body.project_id)
    shown = parse_filter(body.filter)
    sort_by, descending = _sort(body.sort)
    filters = svc.ExperimentFilters(
        archived=None if shown.show_archived else False,
        project_id=body.project_id,
        sort_by=sort_by,
        order_desc=descending,
        show_trial_data=True,
        hidden_project_ids=policy.hidden_project_ids(session, caller.user),
    )
    page = svc.list_experiments(session, filters, offset=body.offset, limit=body.limit)
    best_ids = [v.best_trial_id for v in page.items if v.best_trial_id is not None]
    best = {i: trial_to_wire(v) for i, v in details.trial_views_by_id(session, best_ids).items()}
    return SearchExperimentsResponse(
        experiments=[
            SearchExperimentExperiment(
                experiment=experiment_wire(v),
                best_trial=best.get(v.best_trial_id) if v.best_trial_id is not None else None,
            )
            for v in page.items
        ],
        pagination=page.pagination,
    )
