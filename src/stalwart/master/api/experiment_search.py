"""Route: ``POST /experiments-search`` (Determined's ``SearchExperiments``: the web UI's
experiment table and ``bindings.post_SearchExperiments``): a page of experiments, each with
its best trial.

``projectId`` narrows to one project (404 when the caller cannot see it). ``sort`` is
comma-separated ``<column>=asc|desc`` keys over any column of the table, hyperparameters
(``hp.lr``) and metric summaries (``validation.validation_loss.min``) included; ``filter`` is
the table's filter JSON (conditions on any such column, ``showArchived``). Both are
:mod:`stalwart.master.services.experiment_columns`; ascending id when no sort is given.
"""

from __future__ import annotations

from fastapi import APIRouter

from stalwart.master import policy
from stalwart.master.api.deps import CallerDep, SessionDep
from stalwart.master.api.experiments import experiment_wire
from stalwart.master.api.models.experiment_details import (
    SearchExperimentExperiment,
    SearchExperimentsRequest,
    SearchExperimentsResponse,
)
from stalwart.master.api.trials import trial_to_wire
from stalwart.master.services import experiment_columns as columns
from stalwart.master.services import experiment_details as details
from stalwart.master.services import experiments as svc
from stalwart.master.services import projects as project_svc

__all__ = ["router"]

router = APIRouter(tags=["experiments"])


@router.post("/experiments-search", response_model=SearchExperimentsResponse)
def search_experiments(
    body: SearchExperimentsRequest, caller: CallerDep, session: SessionDep
) -> SearchExperimentsResponse:
    """A page of experiments with their best trials (see the module docstring)."""
    if body.project_id is not None:
        project_svc.get_project(session, caller.user, body.project_id)
    dialect = session.get_bind().dialect.name
    parsed = columns.parse_filter(body.filter, dialect)
    filters = svc.ExperimentFilters(
        archived=None if parsed.show_archived else False,
        project_id=body.project_id,
        sort=columns.parse_sort(body.sort),
        condition=parsed.condition,
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
