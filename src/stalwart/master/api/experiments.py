"""Routes: experiments (create, list, get, edit, state actions, archive, delete, model
definition)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Query, Response
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master import policy
from stalwart.master.api.deps import Caller, CallerDep, SessionDep, StateDep
from stalwart.master.api.models.common import Empty, WireModel
from stalwart.master.api.models.experiments import (
    BestSearcherValidationMetricResponse,
    CreateExperimentRequest,
    CreateExperimentResponse,
    ExperimentLabelResponse,
    ExperimentSortBy,
    GetExperimentResponse,
    GetExperimentsResponse,
    JobSummary,
    ModelDefResponse,
    PatchExperimentRequest,
    PatchExperimentResponse,
    PreviewHPSearchRequest,
    PreviewHPSearchResponse,
    PutExperimentResponse,
    SearchSummary,
    SearchUnit,
    TrialSummary,
    V1Experiment,
)
from stalwart.master.api.models.trials import GetExperimentTrialsResponse, TrialSortBy
from stalwart.master.api.models.users import OrderBy
from stalwart.master.api.trials import arrow_response, trial_to_wire
from stalwart.master.api.wire.experiments import experiment_to_wire
from stalwart.master.db.tables import Experiment, Project, Workspace
from stalwart.master.redact import collect_secrets, redact_archive, redact_config
from stalwart.master.rm.agent.manager import AgentManager
from stalwart.master.rm.base import EnginePools
from stalwart.master.searcher.preview import preview_search
from stalwart.master.services import agents as agent_service
from stalwart.master.services import experiment_columns as columns
from stalwart.master.services import experiments as svc
from stalwart.master.services import metric_tables
from stalwart.master.services import unmanaged as unmanaged_svc
from stalwart.master.services.checkpoint_files import set_gc_policy
from stalwart.master.services.experiment_config import typed_config_of
from stalwart.master.services.experiment_create import create_experiment, defaulted_config
from stalwart.master.services.templates import template_config
from stalwart.master.services.trials import list_experiment_trials
from stalwart.master.state import MasterState

__all__ = ["experiment_wire", "router"]

router = APIRouter(tags=["experiments"])


def _pool_of_text(config_text: str, template: Mapping[str, Any] | None = None) -> str:
    """``resources.resource_pool`` of an experiment's YAML text (else of its template);
    ``default`` when unset or when the text does not parse (experiment creation then reports
    what is wrong with it)."""
    try:
        data = yaml.safe_load(config_text)  # no alias expansion here; parse_yaml bounds it
    except (yaml.YAMLError, RecursionError):
        return "default"
    for layer in (data, template):
        resources = layer.get("resources") if isinstance(layer, Mapping) else None
        if isinstance(resources, Mapping):
            pool = resources.get("resource_pool")
            if isinstance(pool, str) and pool:
                return pool
    return "default"


def _project_named(session: Session, config_text: str) -> int | None:
    """The project an unmanaged experiment's config names (``workspace`` and ``project``,
    both or neither; 404 when they name none), as Determined's master reads them."""
    try:
        data = yaml.safe_load(config_text)
    except (yaml.YAMLError, RecursionError):
        return None  # creation reports what is wrong with the text
    if not isinstance(data, Mapping):
        return None
    workspace, project = data.get("workspace"), data.get("project")
    if not workspace and not project:
        return None
    if not (isinstance(workspace, str) and workspace and isinstance(project, str) and project):
        raise InvalidArgumentError(
            "name both the workspace and the project of the experiment, or neither"
        )
    found = session.scalar(
        select(Project.id)
        .join(Workspace, Workspace.id == Project.workspace_id)
        .where(Workspace.name == workspace, Project.name == project)
    )
    if found is None:
        raise NotFoundError(f"project '{project}' not found in workspace '{workspace}'")
    return int(found)


def _create(
    body: CreateExperimentRequest,
    caller: Caller,
    session: Session,
    state: MasterState,
    external_id: str | None = None,
) -> CreateExperimentResponse:
    unmanaged = bool(body.unmanaged)
    template = template_config(session, caller.user, body.template) if body.template else None
    if isinstance(state.rm, EnginePools) and not unmanaged:
        state.rm.check_pool(_pool_of_text(body.config, template))
    project_id = body.project_id
    if unmanaged and project_id is None:
        project_id = _project_named(session, body.config)
    created = create_experiment(
        session,
        state.settings,
        caller.user,
        config_text=body.config,
        model_definition=[f.model_dump() for f in body.model_definition],
        activate=body.activate,
        project_id=project_id,
        parent_id=body.parent_id,
        validate_only=body.validate_only,
        template=template,
        unmanaged=unmanaged,
        external_experiment_id=external_id,
    )
    exp = created.experiment
    if not body.validate_only:
        state.hints.experiment(exp.id)
    project = session.get(Project, exp.project_id)
    wire = experiment_to_wire(
        exp,
        num_trials=0,
        username=caller.user.username,
        project_owner_id=(project.user_id if project and project.user_id else 1),
        project_name=project.name if project else None,
        workspace_id=project.workspace_id if project else None,
    )
    return CreateExperimentResponse(
        experiment=wire,
        config=redact_config(exp.config),
        warnings=launch_warnings(session, state, exp.config),
        notices=created.notices,
    )


@router.post("/experiments", response_model=CreateExperimentResponse)
def post_experiment(
    body: CreateExperimentRequest,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> CreateExperimentResponse:
    """Create an experiment from YAML text and a model definition (400 if invalid; 400 too
    when the engine defines the pools (Slurm, PBS) and its resource pool is not one). No model
    definition (absent, empty or null) is an experiment without files. ``unmanaged``: the
    SDK's detached mode (:mod:`stalwart.master.services.unmanaged`), created PAUSED, in the
    project its config's ``workspace`` and ``project`` name when the body names none."""
    return _create(body, caller, session, state)


@router.put(
    "/experiments/by-external-id/{external_experiment_id}",
    response_model=PutExperimentResponse,
)
def put_experiment(
    external_experiment_id: str,
    body: CreateExperimentRequest,
    caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> Response:
    """The unmanaged experiment of an external id (the SDK's ``core_v2`` with
    ``external_experiment_id``): created the first time, the same one afterwards (its config
    unchanged; the caller must be able to see it). Managed experiments and forks are refused."""
    if not body.unmanaged:
        raise InvalidArgumentError("only unmanaged experiments can be put by external id")
    if body.parent_id:
        raise InvalidArgumentError("an unmanaged experiment cannot be forked from another")
    if not external_experiment_id.strip() or len(external_experiment_id) > 255:
        raise InvalidArgumentError("externalExperimentId must be 1 to 255 characters")
    found = unmanaged_svc.find_by_external_id(session, external_experiment_id)
    if found is None:
        try:
            created = _create(body, caller, session, state, external_id=external_experiment_id)
        except IntegrityError:  # created meanwhile by another call with the same id
            session.rollback()
            found = unmanaged_svc.find_by_external_id(session, external_experiment_id)
            if found is None:
                raise
        else:
            return _json(
                PutExperimentResponse(experiment=created.experiment, config=created.config or {})
            )
    if not found.unmanaged:
        raise InvalidArgumentError(
            f"experiment {found.id} of external id {external_experiment_id!r} is managed"
        )
    policy.require_view_experiment(session, caller.user, found)
    view = svc.experiment_view(session, found.id)
    return _json(PutExperimentResponse(experiment=_wire(view), config=redact_config(found.config)))


@router.post("/preview-hp-search", response_model=PreviewHPSearchResponse)
def preview_hp_search(
    body: PreviewHPSearchRequest, _caller: CallerDep, state: StateDep
) -> PreviewHPSearchResponse:
    """What the config's searcher would create (``det preview-search``): its defaulted searcher
    section and the planned trials by training length (see
    :mod:`stalwart.master.searcher.preview`). The config is validated as ``det experiment
    create`` validates it (400 naming what is wrong); nothing is stored."""
    if not isinstance(body.config.get("searcher"), dict):
        raise InvalidArgumentError("invalid experiment configuration; missing searcher")
    text = json.dumps(body.config)  # JSON is YAML: the config goes through the same checks
    config, _ = defaulted_config(text, state.settings, archive=None)
    try:
        planned = preview_search(typed_config_of(None, config))
    except ValueError as exc:
        raise InvalidArgumentError(f"invalid searcher configuration: {exc}") from None
    return PreviewHPSearchResponse(
        summary=SearchSummary(
            config=config["searcher"],
            trials=[
                TrialSummary(
                    count=p.count,
                    unit=SearchUnit(name=p.unit, value=p.value, max_length=p.unit is None),
                )
                for p in planned
            ],
        )
    )


def launch_warnings(session: Session, state: MasterState, config: Mapping[str, Any]) -> list[str]:
    """``LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED`` when a trial asks for more slots than the
    agents of its pool have now (Determined's check; ``det`` prints "The requested job requires
    more slots than currently available..."): the experiment is created and waits for them.
    Only pools of Stalwart's agents; an engine or Kubernetes sizes its own."""
    if not isinstance(state.rm, AgentManager):
        return []
    resources = config.get("resources") or {}
    slots = resources.get("slots_per_trial", 1) if isinstance(resources, Mapping) else 1
    pool = resources.get("resource_pool") if isinstance(resources, Mapping) else None
    if not isinstance(slots, int) or slots <= 1:
        return []
    for view in agent_service.resource_pools(session, state.settings.resource_pools):
        if view.name == (pool or "default") and slots > view.slots_available:
            return ["LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED"]
    return []


def _json(model: WireModel) -> Response:
    """A wire model as a JSON response, serialized once by pydantic (big experiment pages skip
    FastAPI's re-validation of the response model)."""
    return Response(model.model_dump_json(by_alias=True), media_type="application/json")


def experiment_wire(view: svc.ExperimentView) -> V1Experiment:
    """The ``v1Experiment`` of a service view (with its trial facts)."""
    return _wire(view)


def _wire(view: svc.ExperimentView) -> V1Experiment:
    wire = experiment_to_wire(
        view.experiment,
        num_trials=view.num_trials,
        username=view.username,
        project_owner_id=view.project_owner_id,
        project_name=view.project_name,
        workspace_id=view.workspace_id,
        workspace_name=view.workspace_name,
        state=view.state,
        display_name=view.display_name,
        parent_archived=view.parent_archived,
        checkpoint_count=view.checkpoint_count,
        checkpoint_size=view.checkpoint_size,
        trial_ids=view.trial_ids,
        duration=view.duration,
    )
    wire.best_trial_id = view.best_trial_id
    wire.best_trial_searcher_metric = view.best_trial_metric
    return wire


@router.get("/experiments", response_model=GetExperimentsResponse)
def get_experiments(
    caller: CallerDep,
    session: SessionDep,
    archived: bool | None = None,
    users: Annotated[list[str] | None, Query()] = None,
    user_ids: Annotated[list[int] | None, Query(alias="userIds")] = None,
    states: Annotated[list[str] | None, Query()] = None,
    name: str | None = None,
    description: str | None = None,
    labels: Annotated[list[str] | None, Query()] = None,
    project_id: Annotated[int | None, Query(alias="projectId")] = None,
    workspace_id: Annotated[int | None, Query(alias="workspaceId")] = None,
    id_gt: Annotated[int | None, Query(alias="experimentIdFilter.gt")] = None,
    id_gte: Annotated[int | None, Query(alias="experimentIdFilter.gte")] = None,
    id_lt: Annotated[int | None, Query(alias="experimentIdFilter.lt")] = None,
    id_lte: Annotated[int | None, Query(alias="experimentIdFilter.lte")] = None,
    id_in: Annotated[list[int] | None, Query(alias="experimentIdFilter.incl")] = None,
    id_not_in: Annotated[list[int] | None, Query(alias="experimentIdFilter.notIn")] = None,
    sort_by: Annotated[ExperimentSortBy, Query(alias="sortBy")] = ExperimentSortBy.UNSPECIFIED,
    order_by: Annotated[OrderBy, Query(alias="orderBy")] = OrderBy.UNSPECIFIED,
    show_trial_data: Annotated[bool, Query(alias="showTrialData")] = False,
    offset: int = 0,
    limit: int = 0,
    sort: str | None = None,
    filter: str | None = None,
) -> Response:
    """A page of experiments (Determined's filters; limit 0 means all, a negative offset counts
    from the end). Each carries its best trial and best searcher metric whatever
    ``showTrialData`` says (they are stored on the row).

    Stalwart extensions: ``sort`` (``hp.lr=asc,id=desc``: any column, as
    ``POST /experiments-search`` takes it) replaces ``sortBy``/``orderBy``; ``filter`` is the
    web UI's filter JSON (:mod:`stalwart.master.services.experiment_columns`)."""
    dialect = session.get_bind().dialect.name
    parsed = columns.parse_filter(filter, dialect)
    if not parsed.show_archived and archived is None:
        archived = False
    filters = svc.ExperimentFilters(
        archived=archived,
        users=users or (),
        user_ids=user_ids or (),
        states=states or (),
        name=name,
        description=description,
        labels=labels or (),
        project_id=project_id,
        workspace_id=workspace_id,
        id_gt=id_gt,
        id_gte=id_gte,
        id_lt=id_lt,
        id_lte=id_lte,
        id_in=id_in or (),
        id_not_in=id_not_in or (),
        sort_by=sort_by.value,
        order_desc=order_by is OrderBy.DESC,
        sort=columns.parse_sort(sort),
        condition=parsed.condition,
        show_trial_data=show_trial_data,
        hidden_project_ids=policy.hidden_project_ids(session, caller.user),
    )
    page = svc.list_experiments(session, filters, offset=offset, limit=limit)
    return _json(
        GetExperimentsResponse(
            experiments=[_wire(v) for v in page.items], pagination=page.pagination
        )
    )


@router.get("/experiments/{experiment_id}", response_model=GetExperimentResponse)
def get_experiment(experiment_id: int, _caller: CallerDep, session: SessionDep) -> Response:
    """One experiment, its config, and its job summary while it is active."""
    view = svc.experiment_view(session, experiment_id)
    summary = None
    if view.job_summary is not None:
        summary = JobSummary(state=view.job_summary[0], jobs_ahead=view.job_summary[1])
    return _json(
        GetExperimentResponse(
            experiment=_wire(view),
            config=redact_config(view.experiment.config),
            job_summary=summary,
        )
    )


def _act(
    state: MasterState, action: Callable[[Session, int], svc.Signals], session: Session, eid: int
) -> None:
    """Run a state action under the lifecycle lock, then wake whom it signalled."""
    with state.lifecycle:
        signals = action(session, eid)
    svc.deliver(state.notifier, signals)
    state.hints.experiment(eid)


@router.post("/experiments/{experiment_id}/pause", response_model=Empty)
def pause(experiment_id: int, _caller: CallerDep, session: SessionDep, state: StateDep) -> Empty:
    """ACTIVE -> PAUSED; running trials are asked to checkpoint and exit."""
    _act(state, svc.pause_experiment, session, experiment_id)
    return Empty()


@router.post("/experiments/{experiment_id}/activate", response_model=Empty)
def activate(experiment_id: int, _caller: CallerDep, session: SessionDep, state: StateDep) -> Empty:
    """PAUSED -> ACTIVE."""
    _act(state, svc.activate_experiment, session, experiment_id)
    return Empty()


@router.post("/experiments/{experiment_id}/cancel", response_model=Empty)
def cancel(experiment_id: int, _caller: CallerDep, session: SessionDep, state: StateDep) -> Empty:
    """-> STOPPING_CANCELED (trials checkpoint and exit), CANCELED once nothing runs."""
    _act(state, svc.cancel_experiment, session, experiment_id)
    return Empty()


@router.post("/experiments/{experiment_id}/kill", response_model=Empty)
def kill(experiment_id: int, _caller: CallerDep, session: SessionDep, state: StateDep) -> Empty:
    """-> STOPPING_KILLED (trials are killed), CANCELED once nothing runs."""
    _act(state, svc.kill_experiment, session, experiment_id)
    return Empty()


@router.post("/experiments/{experiment_id}/archive", response_model=Empty)
def archive(experiment_id: int, _caller: CallerDep, session: SessionDep) -> Empty:
    """Archive a terminal experiment."""
    svc.archive_experiment(session, experiment_id, True)
    return Empty()


@router.post("/experiments/{experiment_id}/unarchive", response_model=Empty)
def unarchive(experiment_id: int, _caller: CallerDep, session: SessionDep) -> Empty:
    """Unarchive an archived experiment."""
    svc.archive_experiment(session, experiment_id, False)
    return Empty()


@router.delete("/experiments/{experiment_id}", response_model=Empty)
def delete(experiment_id: int, caller: CallerDep, session: SessionDep) -> Empty:
    """Delete a terminal experiment and everything recorded about it (owner or admin)."""
    svc.delete_experiment(session, caller.user, experiment_id)
    return Empty()


@router.patch("/experiments/{experiment_id}", response_model=PatchExperimentResponse)
def patch_experiment(
    experiment_id: int,
    body: PatchExperimentRequest,
    _caller: CallerDep,
    session: SessionDep,
    state: StateDep,
) -> Response:
    """Edit name, description, labels, notes, ``max_slots``, ``priority`` or ``weight``
    (Determined's ``PATCH /api/v1/experiments/{id}``; absent or null fields are left as they
    are, except ``resources.maxSlots: null``, which removes the limit).

    ``checkpointStorage`` (``det e set gc-policy``) changes the checkpoint GC policy, applied by
    the cluster loop once the experiment has ended
    (:func:`stalwart.master.services.checkpoint_files.set_gc_policy`).

    400 if the body's ``id`` names another experiment and for a negative ``save_*`` count;
    otherwise see :func:`stalwart.master.services.experiments.patch_experiment`. The scheduler
    is woken so a new ``max_slots``, ``priority`` or ``weight`` applies at once.
    """
    if body.id is not None and body.id != experiment_id:
        raise InvalidArgumentError(
            f"the body's id ({body.id}) is not the experiment in the path ({experiment_id})"
        )
    if body.checkpoint_storage is not None:
        gc = body.checkpoint_storage
        set_gc_policy(
            session,
            experiment_id,
            {
                "save_experiment_best": gc.save_experiment_best,
                "save_trial_best": gc.save_trial_best,
                "save_trial_latest": gc.save_trial_latest,
            },
        )
        session.commit()
    res = body.resources
    svc.patch_experiment(
        session,
        experiment_id,
        svc.ExperimentPatch(
            name=body.name,
            description=body.description,
            labels=body.labels,
            notes=body.notes,
            max_slots=res.max_slots if res else None,
            priority=res.priority if res else None,
            weight=res.weight if res else None,
            clear_max_slots=res is not None and "max_slots" in res.model_fields_set,
        ),
    )
    state.hints.experiment(experiment_id)
    return _json(
        PatchExperimentResponse(experiment=_wire(svc.experiment_view(session, experiment_id)))
    )


@router.put("/experiments/{experiment_id}/labels/{label}", response_model=ExperimentLabelResponse)
def put_label(
    experiment_id: int, label: str, _caller: CallerDep, session: SessionDep, state: StateDep
) -> ExperimentLabelResponse:
    """Add one label (the SDK's ``Experiment.add_label``); a label it has is a no-op. Answers
    the experiment's labels."""
    labels = svc.change_label(session, experiment_id, label, add=True)
    state.hints.experiment(experiment_id)
    return ExperimentLabelResponse(labels=labels)


@router.delete(
    "/experiments/{experiment_id}/labels/{label}", response_model=ExperimentLabelResponse
)
def delete_label(
    experiment_id: int, label: str, _caller: CallerDep, session: SessionDep, state: StateDep
) -> ExperimentLabelResponse:
    """Remove one label (the SDK's ``Experiment.remove_label``); a label it lacks is a no-op.
    Answers the experiment's labels."""
    labels = svc.change_label(session, experiment_id, label, add=False)
    state.hints.experiment(experiment_id)
    return ExperimentLabelResponse(labels=labels)


@router.get("/experiments/{experiment_id}/model_def", response_model=ModelDefResponse)
def model_def(experiment_id: int, _caller: CallerDep, session: SessionDep) -> ModelDefResponse:
    """The model definition as a base64 ``.tar.gz``, with the experiment's secrets masked in
    its files (the submitted config file usually is one of them)."""
    b64 = svc.model_definition_b64(session, experiment_id)
    experiment = session.get(Experiment, experiment_id)
    secrets = collect_secrets(experiment.config) if experiment is not None else []
    if b64 and secrets:
        masked = redact_archive(base64.b64decode(b64), secrets)
        b64 = base64.b64encode(masked).decode()
    return ModelDefResponse(b64_tgz=b64)


@router.get(
    "/experiments/{experiment_id}/searcher/best_searcher_validation_metric",
    response_model=BestSearcherValidationMetricResponse,
)
def best_searcher_validation_metric(
    experiment_id: int, _caller: CallerDep, session: SessionDep
) -> BestSearcherValidationMetricResponse:
    """The best searcher metric so far; 404 while there is none (the harness reads None)."""
    return BestSearcherValidationMetricResponse(
        metric=svc.best_searcher_metric(session, experiment_id)
    )


@router.get(
    "/experiments/{experiment_id}/metrics/arrow",
    response_class=Response,
    responses={200: {"content": {metric_tables.ARROW_STREAM: {}}}},
)
def get_experiment_metrics_arrow(
    experiment_id: int, group: str, _caller: CallerDep, session: SessionDep, state: StateDep
) -> Response:
    """Every trial's reports of one group as an Apache Arrow IPC stream, trial by trial (the
    columns of ``GET /api/v1/trials/metrics/arrow``)."""
    svc.get_experiment(session, experiment_id)
    trial_ids = metric_tables.experiment_trial_ids(session, experiment_id)
    return arrow_response(state, session, trial_ids, group)


@router.get("/experiments/{experiment_id}/trials", response_model=GetExperimentTrialsResponse)
def get_experiment_trials(
    experiment_id: int,
    _caller: CallerDep,
    session: SessionDep,
    states: Annotated[list[str] | None, Query()] = None,
    sort_by: Annotated[TrialSortBy, Query(alias="sortBy")] = TrialSortBy.UNSPECIFIED,
    order_by: Annotated[OrderBy, Query(alias="orderBy")] = OrderBy.UNSPECIFIED,
    offset: int = 0,
    limit: int = 0,
) -> Response:
    """A page of the experiment's trials."""
    page = list_experiment_trials(
        session,
        experiment_id,
        states=states or (),
        sort_by=sort_by.value,
        order_desc=order_by is OrderBy.DESC,
        offset=offset,
        limit=limit,
    )
    return _json(
        GetExperimentTrialsResponse(
            trials=[trial_to_wire(v) for v in page.items], pagination=page.pagination
        )
    )
