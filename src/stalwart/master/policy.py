"""Who may do what: the master's one authorization policy.

Every authenticated request passes :func:`authorize_request` (called by
:func:`stalwart.master.api.deps.get_caller`), which applies the rules below from the route and
its path parameters, so a new route is covered without code of its own. Checks that need a
request body (creating an experiment in a project, listing experiments) call the helpers here.

**Allocation tokens** (a task's ``Grpc-Metadata-x-allocation-token``) reach only the routes in
:data:`TASK_ROUTES`, and only for their own allocation: its allocation id, its task, its trial
(``trial_id``, ``run_id``), its experiment, and checkpoints of its trial (or the one it resumes
or warm-starts from). Anything else is 403.

**Workspace roles** (users): each user has one role per workspace, the highest of their own
assignment there, the roles given there to the groups they belong to, and the workspace's
default role (``member`` unless set):

========  ================================================================================
none      sees nothing of the workspace
viewer    reads its experiments, trials, checkpoints and logs
member    viewer, plus creates experiments and changes (pause, kill, edit, delete...) their own
editor    member, plus changes every experiment of the workspace
admin     editor, plus manages the workspace's role assignments
========  ================================================================================

Models of the model registry follow their workspace the same way: viewers see them, members
create them and change their own (and delete versions they registered), editors change all.

Cluster admins are ``admin`` everywhere. Reading is GET/HEAD (and the few :data:`READ_ROUTES`);
any other method on a route with an experiment, trial, task, checkpoint or allocation in its
path is a change. Tasks without an experiment (generic tasks) are read by anyone and changed by
their owner or an admin. User accounts follow :mod:`stalwart.master.services.users`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import ForbiddenError, InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import (
    Allocation,
    Checkpoint,
    Experiment,
    Model,
    ModelVersion,
    Project,
    Task,
    Trial,
    User,
    UserGroupMember,
    Workspace,
    WorkspaceGroupRole,
    WorkspaceRole,
)

__all__ = [
    "DEFAULT_ROLE",
    "PUBLIC_ROUTES",
    "READ_ROUTES",
    "TASK_ROUTES",
    "Action",
    "Role",
    "authorize_allocation_request",
    "authorize_reports",
    "authorize_user_request",
    "hidden_project_ids",
    "parse_role",
    "require_change_checkpoints",
    "require_change_experiment",
    "require_change_model",
    "require_change_project",
    "require_change_tasks",
    "require_change_workspace",
    "require_create_in_project",
    "require_create_model",
    "require_delete_model_version",
    "require_manage_webhooks",
    "require_manage_workspace",
    "require_view_experiment",
    "require_view_workspace",
    "sees_model",
    "webhook_workspaces",
    "workspace_role",
]


class Role(enum.IntEnum):
    """A role in a workspace; a higher role may do everything a lower one may."""

    NONE = 0
    VIEWER = 1
    MEMBER = 2
    EDITOR = 3
    ADMIN = 4

    @property
    def label(self) -> str:
        """The role's name on the wire (``viewer``...)."""
        return self.name.lower()


DEFAULT_ROLE = Role.MEMBER
"""The role of users without an assignment in a workspace whose default role is not set."""


def parse_role(name: str, *, allowed: frozenset[Role] | None = None) -> Role:
    """The role called ``name`` (case-insensitive); InvalidArgumentError otherwise."""
    choices = sorted(allowed if allowed is not None else set(Role))
    try:
        role = Role[name.strip().upper()]
    except KeyError:
        role = None
    if role is None or role not in choices:
        names = ", ".join(r.label for r in choices)
        raise InvalidArgumentError(f"unknown role {name!r}: use one of {names}")
    return role


class Action(enum.Enum):
    """What a request does to the resource in its path."""

    VIEW = "view"
    CHANGE = "change"


PUBLIC_ROUTES = frozenset(
    {
        "stalwart.master.api.info.get_info",
        "stalwart.master.api.info.get_health",
        "stalwart.master.api.info.get_master",
        "stalwart.master.api.auth.login",
        "stalwart.master.ui.index",
        "stalwart.master.ui.ui_root",
    }
)
"""Endpoints (``module.function``) that answer without credentials. Besides these, the static
UI files under ``/ui/`` and FastAPI's own API description (``/openapi.json``, ``/docs``,
``/redoc``), which hold no data, are public; ``tests/security/test_every_route.py`` checks that
every other route answers 401 without a token."""

READ_ROUTES = frozenset({"stalwart.master.api.experiment_details.model_def_file"})
"""Endpoints (``module.function``) that only read though their method is not GET (a body
names what to read): they need a role that sees what their path names, not one that may
change it."""

TASK_ROUTES = frozenset(
    f"stalwart.master.api.{name}"
    for name in (
        "auth.me",
        "trials.report_metrics",
        "trials.report_metrics_batch",
        "trials.report_progress",
        "trials.report_early_exit",
        "trials.set_runner_metadata",
        "trials.get_trial",
        "trials.run_prepare",
        "trials.post_run_metadata",
        "trials.get_run_metadata",
        "trials.report_trial_source_info",
        "checkpoints.report_checkpoint",
        "checkpoints.get_checkpoint",
        "checkpoints.post_checkpoint_metadata",
        "checkpoints.patch_checkpoints",
        "checkpoints.delete_checkpoints",
        "experiments.best_searcher_validation_metric",
        "logs.post_task_logs",
        "logs.post_task_logs_legacy",
        "tasks.get_context_directory",
        "tasks.get_accelerator_data",
        "allocations.post_accelerator_data",
        "allocations.get_rendezvous_info",
        "allocations.get_preemption_signal",
        "allocations.ack_preemption",
        "allocations.pending_preemption",
        "allocations.all_gather",
        "allocations.notify_container_running",
        "allocations.post_proxy_address",
        "allocations.allocation_ready",
        "allocations.allocation_waiting",
        "allocations.mark_resources_daemon",
        "interactive.report_idle",
        "batch.batch_start",
        "batch.batch_exit",
        "webhooks.post_webhook_event_data",
    )
)
"""Endpoints an allocation token may call (for its own allocation only); the Core API of the
Stalwart and the official harness, ``ship_logs.py``, ``prep_container`` and the launchers."""


# --- workspace roles ---


def _stored(name: str | None) -> Role:
    """A stored role name (None: the default role)."""
    return Role[name.upper()] if name else DEFAULT_ROLE


def _role_of(session: Session, user: User, workspace_id: int) -> Role:
    if user.admin:
        return Role.ADMIN
    # One query: the user's assignment, their groups' assignments, the workspace's default.
    own = select(WorkspaceRole.role).where(
        WorkspaceRole.workspace_id == workspace_id, WorkspaceRole.user_id == user.id
    )
    groups = (
        select(WorkspaceGroupRole.role)
        .join(UserGroupMember, UserGroupMember.group_id == WorkspaceGroupRole.group_id)
        .where(WorkspaceGroupRole.workspace_id == workspace_id, UserGroupMember.user_id == user.id)
    )
    default = select(Workspace.default_role).where(Workspace.id == workspace_id)
    names = session.scalars(own.union_all(groups, default)).all()
    return max((_stored(name) for name in names), default=DEFAULT_ROLE)


def workspace_role(session: Session, user: User, workspace_id: int) -> Role:
    """``user``'s role in workspace ``workspace_id`` (see the module contract)."""
    return _role_of(session, user, workspace_id)


def _workspace_of_project(session: Session, project_id: int) -> int:
    workspace_id = session.scalar(select(Project.workspace_id).where(Project.id == project_id))
    return workspace_id if workspace_id is not None else 1


def _experiment_label(experiment: Experiment) -> str:
    return f"experiment {experiment.id}"


def _workspace_name(session: Session, workspace_id: int) -> str:
    workspace = session.get(Workspace, workspace_id)
    return workspace.name if workspace is not None else str(workspace_id)


def require_view_experiment(session: Session, user: User, experiment: Experiment) -> None:
    """ForbiddenError unless ``user`` may read ``experiment``."""
    workspace_id = _workspace_of_project(session, experiment.project_id)
    if _role_of(session, user, workspace_id) < Role.VIEWER:
        raise ForbiddenError(
            f"user {user.username} cannot see {_experiment_label(experiment)}: it is in "
            f"workspace '{_workspace_name(session, workspace_id)}', where they have no role "
            "(ask an admin of the workspace for one)"
        )


def require_change_experiment(session: Session, user: User, experiment: Experiment) -> None:
    """ForbiddenError unless ``user`` may change ``experiment`` (editor, or member and owner)."""
    workspace_id = _workspace_of_project(session, experiment.project_id)
    role = _role_of(session, user, workspace_id)
    if role >= Role.EDITOR or (role >= Role.MEMBER and experiment.owner_id == user.id):
        return
    owned = "their own experiments" if role >= Role.MEMBER else "no experiment"
    raise ForbiddenError(
        f"user {user.username} cannot change {_experiment_label(experiment)}: their role in "
        f"workspace '{_workspace_name(session, workspace_id)}' is {role.label}, which may change "
        f"{owned} (an editor of the workspace, or an admin, can)"
    )


def require_create_in_project(session: Session, user: User, project_id: int) -> None:
    """ForbiddenError unless ``user`` may create experiments in project ``project_id``."""
    workspace_id = _workspace_of_project(session, project_id)
    role = _role_of(session, user, workspace_id)
    if role < Role.MEMBER:
        raise ForbiddenError(
            f"user {user.username} cannot create experiments in workspace "
            f"'{_workspace_name(session, workspace_id)}': their role there is {role.label} "
            "(a member, editor or admin role is needed; ask an admin of the workspace)"
        )


def require_manage_workspace(session: Session, user: User, workspace_id: int) -> None:
    """ForbiddenError unless ``user`` may change workspace ``workspace_id``'s role assignments."""
    if _role_of(session, user, workspace_id) < Role.ADMIN:
        raise ForbiddenError(
            f"only an admin of workspace '{_workspace_name(session, workspace_id)}' (or a "
            "cluster admin) can change its role assignments"
        )


def require_view_workspace(session: Session, user: User, workspace_id: int) -> Workspace:
    """The workspace, or NotFoundError when it does not exist or ``user`` has no role there
    (a workspace one may not see is not revealed)."""
    workspace = session.get(Workspace, workspace_id)
    if workspace is None or _role_of(session, user, workspace_id) < Role.VIEWER:
        raise NotFoundError(f"workspace {workspace_id} not found")
    return workspace


def require_change_workspace(session: Session, user: User, workspace: Workspace, what: str) -> None:
    """ForbiddenError unless ``user`` may change ``workspace`` itself (rename, archive, delete,
    its settings): a workspace admin or a cluster admin. ``what`` names the change."""
    if _role_of(session, user, workspace.id) < Role.ADMIN:
        raise ForbiddenError(
            f"user {user.username} cannot {what} workspace '{workspace.name}': only an admin of "
            "the workspace (or a cluster admin) can"
        )


def require_change_project(session: Session, user: User, project: Project, what: str) -> None:
    """ForbiddenError unless ``user`` may change ``project`` (rename, describe, key, archive,
    delete): an editor of its workspace, or a member who created the project."""
    role = _role_of(session, user, project.workspace_id)
    if role >= Role.EDITOR or (role >= Role.MEMBER and project.user_id == user.id):
        return
    raise ForbiddenError(
        f"user {user.username} cannot {what} project '{project.name}': their role in workspace "
        f"'{_workspace_name(session, project.workspace_id)}' is {role.label} (an editor of the "
        "workspace, the project's creator, or an admin can)"
    )


def require_manage_webhooks(session: Session, user: User, workspace_id: int | None) -> None:
    """ForbiddenError unless ``user`` may create, change, test or delete webhooks of workspace
    ``workspace_id`` (editor or admin there), or global ones (None: cluster admins only)."""
    if workspace_id is None:
        if not user.admin:
            raise ForbiddenError(
                f"user {user.username} cannot manage global webhooks: only cluster admins can "
                "(a workspace editor or admin can manage the webhooks of that workspace)"
            )
        return
    role = _role_of(session, user, workspace_id)
    if role < Role.EDITOR:
        raise ForbiddenError(
            f"user {user.username} cannot manage the webhooks of workspace "
            f"'{_workspace_name(session, workspace_id)}': their role there is {role.label} (an "
            "editor or admin role is needed)"
        )


def webhook_workspaces(session: Session, user: User) -> list[int] | None:
    """The workspaces whose webhooks ``user`` sees (those they may manage: webhook URLs are
    often secrets); None means every webhook, global ones included (cluster admins)."""
    if user.admin:
        return None
    ids = list(session.scalars(select(Workspace.id)))
    return [ws for ws in ids if _role_of(session, user, ws) >= Role.EDITOR]


def hidden_project_ids(session: Session, user: User) -> list[int]:
    """Projects of the workspaces where ``user`` has role ``none`` (their experiments are left
    out of lists); usually empty, so lists cost nothing extra."""
    if user.admin:
        return []
    hidden: list[int] = []
    own = select(WorkspaceRole.workspace_id, WorkspaceRole.role).where(
        WorkspaceRole.user_id == user.id
    )
    groups = (
        select(WorkspaceGroupRole.workspace_id, WorkspaceGroupRole.role)
        .join(UserGroupMember, UserGroupMember.group_id == WorkspaceGroupRole.group_id)
        .where(UserGroupMember.user_id == user.id)
    )
    assigned: dict[int, Role] = {}
    for ws_id, name in session.execute(own.union_all(groups)).all():
        assigned[ws_id] = max(assigned.get(ws_id, Role.NONE), _stored(name))
    rows = session.execute(select(Workspace.id, Workspace.default_role))
    hidden_workspaces = [
        ws_id
        for ws_id, default in rows
        if max(assigned.get(ws_id, Role.NONE), _stored(default)) < Role.VIEWER
    ]
    if hidden_workspaces:
        hidden = list(
            session.scalars(select(Project.id).where(Project.workspace_id.in_(hidden_workspaces)))
        )
    return hidden


# --- requests ---


@dataclass(frozen=True)
class _Target:
    """What a request's path names: the experiment and/or task it acts on."""

    experiment: Experiment | None = None
    task: Task | None = None
    workspace_id: int | None = None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _target(session: Session, params: Mapping[str, Any]) -> _Target:
    """Resolve the path parameters that name guarded resources (missing ones: left to the
    route, which answers 404)."""
    experiment: Experiment | None = None
    task: Task | None = None
    if "experiment_id" in params and (eid := _int(params["experiment_id"])) is not None:
        experiment = session.get(Experiment, eid)
    for key in ("trial_id", "run_id"):
        if key in params and (tid := _int(params[key])) is not None:
            trial = session.get(Trial, tid)
            if trial is not None:
                experiment = session.get(Experiment, trial.experiment_id)
    if "uuid" in params:
        ckpt = session.get(Checkpoint, str(params["uuid"]))
        if ckpt is not None and ckpt.experiment_id is not None:
            experiment = session.get(Experiment, ckpt.experiment_id)
        elif ckpt is not None and ckpt.task_id is not None:
            task = session.get(Task, ckpt.task_id)
    if "task_id" in params:
        task = session.get(Task, str(params["task_id"]))
    if "allocation_id" in params:
        allocation = session.get(Allocation, str(params["allocation_id"]))
        if allocation is not None:
            task = session.get(Task, allocation.task_id)
    if task is not None and task.experiment_id is not None and experiment is None:
        experiment = session.get(Experiment, task.experiment_id)
    workspace_id = _int(params.get("workspace_id")) if "workspace_id" in params else None
    return _Target(experiment=experiment, task=task, workspace_id=workspace_id)


def authorize_user_request(
    session: Session,
    user: User,
    method: str,
    params: Mapping[str, Any],
    trial_ids: Iterable[str] = (),
) -> None:
    """Apply the workspace rules to a user's request on the resources its path names (and the
    trials of a ``trialIds`` query: metrics streams read several trials at once)."""
    action = Action.VIEW if method in ("GET", "HEAD") else Action.CHANGE
    for raw in trial_ids:
        trial_id = _int(raw)
        trial = session.get(Trial, trial_id) if trial_id is not None else None
        experiment = session.get(Experiment, trial.experiment_id) if trial is not None else None
        if experiment is not None:
            require_view_experiment(session, user, experiment)
    target = _target(session, params)
    if target.experiment is not None:
        if action is Action.VIEW:
            require_view_experiment(session, user, target.experiment)
        else:
            require_change_experiment(session, user, target.experiment)
    elif target.task is not None and not user.admin and target.task.owner_id != user.id:
        task = target.task
        if action is Action.CHANGE:
            raise ForbiddenError(
                f"user {user.username} cannot act on task {task.task_id}: only its owner or "
                "an admin can"
            )
        if task.workspace_id is not None and _role_of(session, user, task.workspace_id) < (
            Role.VIEWER
        ):
            raise ForbiddenError(
                f"user {user.username} has no role in workspace "
                f"'{_workspace_name(session, task.workspace_id)}' of task {task.task_id} (ask "
                "an admin of the workspace for one)"
            )
    if (
        target.workspace_id is not None
        and action is Action.VIEW
        and _role_of(session, user, target.workspace_id) < Role.VIEWER
    ):
        # not revealed: answered as an unknown workspace is
        raise NotFoundError(f"workspace {target.workspace_id} not found")


def _no_entry(allocation: Allocation, what: str) -> ForbiddenError:
    return ForbiddenError(
        f"the allocation token of {allocation.id} cannot reach {what}: a task's token reaches "
        "only its own allocation, trial and experiment (use a user token for anything else)"
    )


def authorize_allocation_request(
    session: Session,
    allocation: Allocation,
    task: Task,
    endpoint: str | None,
    params: Mapping[str, Any],
) -> None:
    """Refuse a task's request outside :data:`TASK_ROUTES` or its own allocation."""
    if endpoint is None or endpoint not in TASK_ROUTES:
        name = endpoint.rsplit(".", 1)[-1] if endpoint else "an unknown route"
        raise _no_entry(allocation, f"this endpoint ({name})")
    if "allocation_id" in params and str(params["allocation_id"]) != allocation.id:
        raise _no_entry(allocation, f"allocation {params['allocation_id']}")
    if "task_id" in params and str(params["task_id"]) != task.task_id:
        raise _no_entry(allocation, f"task {params['task_id']}")
    for key in ("trial_id", "run_id"):
        if key in params and _int(params[key]) != task.trial_id:
            raise _no_entry(allocation, f"trial {params[key]}")
    if "experiment_id" in params and _int(params["experiment_id"]) != task.experiment_id:
        raise _no_entry(allocation, f"experiment {params['experiment_id']}")
    if "uuid" in params:
        ckpt = session.get(Checkpoint, str(params["uuid"]))
        if ckpt is not None and ckpt.task_id != task.task_id:
            trial = session.get(Trial, task.trial_id) if task.trial_id is not None else None
            resumes_from = trial is not None and ckpt.uuid in (
                trial.latest_checkpoint,
                trial.warm_start_checkpoint,
            )
            same_trial = ckpt.trial_id is not None and ckpt.trial_id == task.trial_id
            if not (resumes_from or same_trial):
                raise _no_entry(allocation, f"checkpoint {params['uuid']}")


def authorize_reports(
    session: Session, user: User, allocation_id: str | None, trial_ids: set[int]
) -> None:
    """Refuse reports naming trials in their body (metrics batches, ``runs/start``) for trials
    the caller may not report to: a task only its own trial, a user only trials they may
    change."""
    if allocation_id is not None:
        allocation = session.get(Allocation, allocation_id)
        task = session.get(Task, allocation.task_id) if allocation is not None else None
        if allocation is None or task is None:
            raise ForbiddenError(f"allocation {allocation_id} not found")
        others = sorted(t for t in trial_ids if t != task.trial_id)
        if others:
            raise _no_entry(allocation, f"trial {others[0]}")
        return
    for trial_id in sorted(trial_ids):
        trial = session.get(Trial, trial_id)
        experiment = session.get(Experiment, trial.experiment_id) if trial is not None else None
        if experiment is not None:
            require_change_experiment(session, user, experiment)


def require_change_checkpoints(session: Session, user: User, uuids: Iterable[str]) -> None:
    """Refuse a user's change of checkpoints (named in a body) of experiments they may not
    change; unknown uuids are left to the caller (404)."""
    for uuid in uuids:
        ckpt = session.get(Checkpoint, uuid)
        if ckpt is None:
            continue
        if ckpt.experiment_id is not None:
            experiment = session.get(Experiment, ckpt.experiment_id)
            if experiment is not None:
                require_change_experiment(session, user, experiment)
        elif ckpt.task_id is not None:
            _require_task_owner(session, user, ckpt.task_id)


def require_change_tasks(session: Session, user: User, task_ids: Iterable[str]) -> None:
    """Refuse a user's writes (log lines, checkpoint reports) to tasks they may not change."""
    for task_id in sorted(set(task_ids)):
        task = session.get(Task, task_id)
        if task is None:
            continue
        experiment = (
            session.get(Experiment, task.experiment_id) if task.experiment_id is not None else None
        )
        if experiment is not None:
            require_change_experiment(session, user, experiment)
        else:
            _require_task_owner(session, user, task_id)


def _require_task_owner(session: Session, user: User, task_id: str) -> None:
    task = session.get(Task, task_id)
    if task is not None and not user.admin and task.owner_id != user.id:
        raise ForbiddenError(
            f"user {user.username} cannot act on task {task_id}: only its owner or an admin can"
        )


# --- models (the model registry) ---


def sees_model(session: Session, user: User, model: Model) -> bool:
    """Whether ``user`` may see ``model`` (a role of viewer or more in its workspace); a model
    the caller cannot see is answered as not found."""
    return _role_of(session, user, model.workspace_id) >= Role.VIEWER


def require_create_model(session: Session, user: User, workspace_id: int) -> None:
    """ForbiddenError unless ``user`` may create models in workspace ``workspace_id``."""
    role = _role_of(session, user, workspace_id)
    if role < Role.MEMBER:
        raise ForbiddenError(
            f"user {user.username} cannot create models in workspace "
            f"'{_workspace_name(session, workspace_id)}': their role there is {role.label} "
            "(a member, editor or admin role is needed; ask an admin of the workspace)"
        )


def require_change_model(session: Session, user: User, model: Model) -> None:
    """ForbiddenError unless ``user`` may change (or delete) ``model``: an editor of its
    workspace, or a member who created it."""
    role = _role_of(session, user, model.workspace_id)
    if role >= Role.EDITOR or (role >= Role.MEMBER and model.user_id == user.id):
        return
    owned = "the models they created" if role >= Role.MEMBER else "no model"
    raise ForbiddenError(
        f"user {user.username} cannot change model '{model.name}': their role in workspace "
        f"'{_workspace_name(session, model.workspace_id)}' is {role.label}, which may change "
        f"{owned} (an editor of the workspace, or an admin, can)"
    )


def require_delete_model_version(
    session: Session, user: User, model: Model, version: ModelVersion
) -> None:
    """ForbiddenError unless ``user`` may delete ``version``: an editor of the model's
    workspace, or a member who registered the version or created the model."""
    role = _role_of(session, user, model.workspace_id)
    mine = user.id in (version.user_id, model.user_id)
    if role >= Role.EDITOR or (role >= Role.MEMBER and mine):
        return
    raise ForbiddenError(
        f"user {user.username} cannot delete version {version.version} of model "
        f"'{model.name}': their role in workspace "
        f"'{_workspace_name(session, model.workspace_id)}' is {role.label} (members delete the "
        "versions they registered; an editor of the workspace, or an admin, can)"
    )
