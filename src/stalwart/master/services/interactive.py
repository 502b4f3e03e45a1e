"""Interactive tasks: commands, notebooks, shells, TensorBoards and generic tasks.

Each is a :class:`~stalwart.master.db.tables.Task` without a trial (id: a UUID, as Determined's
client expects) with one allocation that the resource manager schedules like a trial's: the
same queue, pools, priorities and engines. What runs in it is built by
:func:`stalwart.master.services.task_spec.interactive_task_specs`.

Contracts:

- :func:`launch_task` validates everything before it writes anything (config, workspace role,
  entrypoint, files, TensorBoard sources) and adds the task and its PENDING allocation to the
  session; the caller commits. A caller needs a member role (or more) in the workspace.
- :func:`kill_task` ends an unstarted allocation at once and asks a started one to stop
  (TERMINATING, the engine kills it); the caller commits, then wakes the returned allocations.
  Only the task's owner or an admin may kill it.
- :func:`task_state` is Determined's ``taskv1State`` of a task from its allocation;
  :func:`exit_status` the text ``det cmd list`` shows once it ended.
- :func:`can_view` / :func:`require_view`: a task is visible to those with a viewer role (or
  more) in its workspace; the proxy and every read use them.
- :func:`mark_ready` (``POST /allocations/{id}/ready``) and :func:`report_idle`
  (``PUT /notebooks/{id}/report_idle``) record what the task says about itself;
  :func:`note_activity` what the proxy saw; :func:`idle_expired` which tasks have been idle
  longer than their ``idle_timeout``.
"""

from __future__ import annotations

import datetime as dt
import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.config import DefaultsLayers
from stalwart.config.command import CommandConfig, TaskKind, load_command_config
from stalwart.config.resources import ResourcesConfig
from stalwart.errors import (
    ConfigError,
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
)
from stalwart.master import policy
from stalwart.master.db.tables import Allocation, Experiment, Task, Trial, User, Workspace, utcnow
from stalwart.master.services.agents import release_slots
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.experiment_create import fill_images
from stalwart.master.services.experiments import UNSTARTED_ALLOCATION_STATES
from stalwart.master.services.model_def import build_archive
from stalwart.master.services.petnames import petname
from stalwart.master.services.pool_bindings import require_pool_usable
from stalwart.master.services.shell_keys import generate_key_pair
from stalwart.master.services.tasks import start_allocation
from stalwart.master.services.workspaces import default_pool_for
from stalwart.master.settings import MasterSettings
from stalwart.master.transitions import LIVE_ALLOCATION_STATES, set_allocation_state

__all__ = [
    "KIND_LABELS",
    "WIRE_TASK_STATES",
    "Launch",
    "can_view",
    "exit_status",
    "get_task",
    "idle_expired",
    "is_paused",
    "kill_task",
    "latest_allocation",
    "launch_task",
    "list_tasks",
    "mark_ready",
    "note_activity",
    "pause_task",
    "preview_config",
    "report_idle",
    "require_view",
    "shell_user",
    "stop_task",
    "task_config",
    "task_resources",
    "task_state",
    "tensorboard_sources",
    "unpause_task",
]

KIND_LABELS: Mapping[str, str] = {
    "COMMAND": "Command",
    "NOTEBOOK": "Notebook",
    "SHELL": "Shell",
    "TENSORBOARD": "TensorBoard",
    "GENERIC": "Task",
}

_PREFIX = "invalid task configuration: "

_ACTIVITY_RESOLUTION = dt.timedelta(seconds=5)
"""Proxied requests closer together than this do not write ``last_activity`` again."""


@dataclass(frozen=True)
class Launch:
    """What a user asked for (``POST /api/v1/commands`` and friends)."""

    kind: TaskKind
    config: Mapping[str, Any] | None = None
    files: Sequence[Mapping[str, Any]] = ()
    workspace_id: int | None = None
    template_name: str | None = None
    template: Mapping[str, Any] | None = None
    """The settings of template ``template_name``, read by the caller
    (:func:`stalwart.master.services.templates.template_config`: the caller's right to read it
    is checked there); merged under ``config``."""
    experiment_ids: Sequence[int] = ()
    trial_ids: Sequence[int] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    context: bytes | None = None
    """Files already archived (a generic task forked with its parent's files)."""


def _invalid(problems: Iterable[str]) -> InvalidArgumentError:
    return InvalidArgumentError(_PREFIX + "; ".join(problems))


def _workspace(session: Session, user: User, workspace_id: int | None) -> Workspace:
    workspace = session.get(Workspace, workspace_id or 1)
    if workspace is None:
        raise NotFoundError(f"workspace {workspace_id} not found")
    role = policy.workspace_role(session, user, workspace.id)
    if role < policy.Role.MEMBER:
        raise ForbiddenError(
            f"user {user.username} cannot start tasks in workspace '{workspace.name}': their "
            f"role there is {role.label} (a member, editor or admin role is needed; ask an "
            "admin of the workspace)"
        )
    if workspace.archived:
        raise FailedPreconditionError(
            f"workspace '{workspace.name}' is archived and takes no new tasks (unarchive it first)"
        )
    return workspace


def _config(settings: MasterSettings, launch: Launch) -> tuple[dict[str, Any], list[str]]:
    """The defaulted config as stored, and notices for the task's log."""
    notices: list[str] = []
    if launch.template_name and launch.template is None:
        raise NotFoundError(f"template '{launch.template_name}' not found")
    pool = ""
    for layer in (launch.config or {}, launch.template or {}):
        resources = layer.get("resources")
        if not pool and isinstance(resources, Mapping) and resources.get("resource_pool"):
            pool = str(resources["resource_pool"])
    try:
        typed = load_command_config(
            launch.config,
            launch.kind,
            DefaultsLayers(
                template=launch.template,
                pool_tcd=settings.pool_task_container_defaults(pool or "default"),
                master_tcd=settings.task_container_defaults,
            ),
        )
    except ConfigError as exc:
        raise _invalid(exc.problems) from None
    if launch.kind in ("COMMAND", "GENERIC") and not typed.entrypoint:
        what = "command" if launch.kind == "COMMAND" else "task"
        raise _invalid(
            [
                f"a {what} needs an entrypoint: give it on the command line (det cmd run CMD) or "
                "as `entrypoint` in the config"
            ]
        )
    config = typed.to_dict()
    if not config.get("description"):
        config["description"] = f"{KIND_LABELS[launch.kind]} ({petname()})"
    notices += fill_images(config, None)
    return config, notices


def tensorboard_sources(
    session: Session, user: User, extra: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The trials a TensorBoard shows (its experiments' trials and its own trials), each with
    its experiment's checkpoint storage, as ``DET_TENSORBOARD_SOURCES`` carries them."""
    trial_ids = {int(t) for t in extra.get("trial_ids") or []}
    experiment_ids = [int(e) for e in extra.get("experiment_ids") or []]
    if experiment_ids:
        trial_ids |= set(
            session.scalars(select(Trial.id).where(Trial.experiment_id.in_(experiment_ids)))
        )
    out = []
    for trial in session.scalars(select(Trial).where(Trial.id.in_(sorted(trial_ids)))):
        experiment = session.get(Experiment, trial.experiment_id)
        if experiment is None or not _may_view_experiment(session, user, experiment):
            continue
        storage = typed_config(experiment).checkpoint_storage
        out.append(
            {
                "experiment_id": experiment.id,
                "trial_id": trial.id,
                "storage": storage.to_dict() if storage is not None else None,
            }
        )
    return sorted(out, key=lambda s: (s["experiment_id"], s["trial_id"]))


def _may_view_experiment(session: Session, user: User, experiment: Experiment) -> bool:
    try:
        policy.require_view_experiment(session, user, experiment)
    except ForbiddenError:
        return False
    return True


def _tensorboard_extra(session: Session, user: User, launch: Launch) -> dict[str, Any]:
    if not launch.experiment_ids and not launch.trial_ids:
        raise InvalidArgumentError(
            "a TensorBoard needs experiments or trials: det tensorboard start EXPERIMENT_ID... "
            "or det tensorboard start -t TRIAL_ID..."
        )
    for experiment_id in launch.experiment_ids:
        experiment = session.get(Experiment, experiment_id)
        if experiment is None:
            raise NotFoundError(f"experiment {experiment_id} not found")
        policy.require_view_experiment(session, user, experiment)
    for trial_id in launch.trial_ids:
        trial = session.get(Trial, trial_id)
        experiment = session.get(Experiment, trial.experiment_id) if trial is not None else None
        if trial is None or experiment is None:
            raise NotFoundError(f"trial {trial_id} not found")
        policy.require_view_experiment(session, user, experiment)
    return {
        "experiment_ids": sorted({int(e) for e in launch.experiment_ids}),
        "trial_ids": sorted({int(t) for t in launch.trial_ids}),
    }


def _secrets(kind: TaskKind) -> dict[str, Any] | None:
    if kind == "NOTEBOOK":
        return {"notebook_token": secrets.token_urlsafe(32)}
    if kind == "SHELL":
        private, public = generate_key_pair()
        return {"private_key": private, "public_key": public}
    return None


def preview_config(settings: MasterSettings, launch: Launch) -> tuple[dict[str, Any], list[str]]:
    """The config ``launch`` would run with, and its notices; nothing is written."""
    return _config(settings, launch)


def launch_task(
    session: Session, settings: MasterSettings, user: User, launch: Launch
) -> tuple[Task, list[str]]:
    """A new interactive task and its PENDING allocation (see the module contract), with the
    notices for its submitter; nothing is written when any check fails."""
    workspace = _workspace(session, user, launch.workspace_id)
    config, notices = _config(settings, launch)
    fallback = default_pool_for(workspace, CommandConfig.model_validate(config).slots)
    resources = config.setdefault("resources", {})
    if not resources.get("resource_pool") and fallback:
        resources["resource_pool"] = fallback  # the workspace's default pool
    pool = task_resources(config).resource_pool or "default"
    require_pool_usable(session, pool, workspace.id, KIND_LABELS[launch.kind].lower())
    extra = dict(launch.extra)
    if launch.kind == "TENSORBOARD":
        extra |= _tensorboard_extra(session, user, launch)
    archive = (
        build_archive(launch.files, max_bytes=settings.limits.max_model_definition_bytes)
        if launch.files
        else launch.context
    )
    task = Task(
        task_id=str(uuid.uuid4()),
        task_type=launch.kind,
        owner_id=user.id,
        name=str(config["description"]),
        workspace_id=workspace.id,
        config=config,
        context=archive,
        secrets=_secrets(launch.kind),
        extra=extra or None,
        start_time=utcnow(),
    )
    session.add(task)
    session.flush()
    typed = CommandConfig.model_validate(config)
    start_allocation(
        session,
        task.task_id,
        slots=typed.slots,
        resource_pool=typed.resources.resource_pool or "default",
    )
    return task, notices


def task_config(task: Task) -> CommandConfig:
    """The typed config of an interactive task."""
    return CommandConfig.model_validate(task.config or {})


def task_resources(config: Mapping[str, Any]) -> ResourcesConfig:
    """The resources section of a stored interactive-task config."""
    return CommandConfig.model_validate(config).resources


def get_task(session: Session, user: User, task_id: str, kind: TaskKind | None = None) -> Task:
    """An interactive task the caller may see (of ``kind``, when given); 404 otherwise."""
    task = session.get(Task, task_id)
    label = KIND_LABELS.get(kind or "", "task").lower()
    if task is None or task.trial_id is not None or (kind is not None and task.task_type != kind):
        raise NotFoundError(f"{label} {task_id} not found")
    if not can_view(session, user, task):
        raise NotFoundError(f"{label} {task_id} not found")
    return task


def can_view(session: Session, user: User, task: Task) -> bool:
    """Whether ``user`` may see ``task`` (a viewer role or more in its workspace)."""
    if task.trial_id is not None and task.experiment_id is not None:
        experiment = session.get(Experiment, task.experiment_id)
        return experiment is not None and _may_view_experiment(session, user, experiment)
    if user.admin or task.owner_id == user.id:
        return True
    return policy.workspace_role(session, user, task.workspace_id or 1) >= policy.Role.VIEWER


def require_view(session: Session, user: User, task: Task) -> None:
    """ForbiddenError unless ``user`` may see ``task``."""
    if not can_view(session, user, task):
        raise ForbiddenError(
            f"user {user.username} has no access to task {task.task_id}: it belongs to a "
            "workspace where they have no role (ask an admin of the workspace for one)"
        )


def list_tasks(
    session: Session,
    user: User,
    kind: TaskKind,
    *,
    usernames: Sequence[str] = (),
    user_ids: Sequence[int] = (),
    workspace_id: int | None = None,
) -> list[Task]:
    """The tasks of ``kind`` the caller may see, oldest first, filtered as asked."""
    query = select(Task).where(Task.task_type == kind).order_by(Task.start_time, Task.task_id)
    if workspace_id is not None:
        query = query.where(Task.workspace_id == workspace_id)
    owners = set(user_ids)
    if usernames:
        owners |= set(session.scalars(select(User.id).where(User.username.in_(list(usernames)))))
        if not owners:
            return []
    if owners:
        query = query.where(Task.owner_id.in_(sorted(owners)))
    return [t for t in session.scalars(query) if can_view(session, user, t)]


def latest_allocation(session: Session, task_id: str) -> Allocation | None:
    """The task's newest allocation."""
    return session.scalar(
        select(Allocation)
        .where(Allocation.task_id == task_id)
        .order_by(Allocation.start_time.desc(), Allocation.id.desc())
        .limit(1)
    )


WIRE_TASK_STATES: Mapping[str, str] = {
    "PENDING": "STATE_QUEUED",
    "ASSIGNED": "STATE_QUEUED",
    "WAITING": "STATE_WAITING",
    "PULLING": "STATE_PULLING",
    "STARTING": "STATE_STARTING",
    "RUNNING": "STATE_RUNNING",
    "TERMINATING": "STATE_TERMINATING",
    "TERMINATED": "STATE_TERMINATED",
}
"""Determined's ``taskv1State`` of each allocation state."""


def task_state(task: Task, allocation: Allocation | None) -> str:
    """Determined's ``taskv1State`` of an interactive task."""
    if allocation is None:
        return "STATE_TERMINATED" if task.end_time is not None else "STATE_QUEUED"
    return WIRE_TASK_STATES.get(allocation.state, "STATE_UNSPECIFIED")


def exit_status(allocation: Allocation | None) -> str | None:
    """What ``det cmd list`` shows as the exit status (None while it runs)."""
    if allocation is None or allocation.state != "TERMINATED":
        return None
    if allocation.exit_code == 0:
        return "exited with code 0"
    if allocation.exit_code is not None:
        reason = f": {allocation.exit_reason}" if allocation.exit_reason else ""
        return f"exited with code {allocation.exit_code}{reason}"
    return allocation.exit_reason or "terminated"


def kill_task(
    session: Session, user: User, task: Task, reason: str = "killed by a user"
) -> set[str]:
    """Stop ``task`` (see the module contract); the allocations to wake after the commit."""
    if not user.admin and task.owner_id != user.id:
        raise ForbiddenError(
            f"user {user.username} cannot kill task {task.task_id}: only its owner or an admin can"
        )
    return stop_task(session, task, reason)


def _generic(task: Task, verb: str) -> None:
    if task.task_type != "GENERIC":
        raise InvalidArgumentError(
            f"cannot {verb} task {task.task_id}: it is a {KIND_LABELS.get(task.task_type, 'task')}"
            "; only generic tasks (det task create) can be paused (make sure task is of type "
            "GENERIC)"
        )


def is_paused(task: Task) -> bool:
    """Whether a generic task is paused (:func:`pause_task`)."""
    return bool((task.extra or {}).get("paused"))


def pause_task(session: Session, task: Task) -> set[str]:
    """Pause a generic task (``det task pause``), as Determined: its allocation is stopped
    (no checkpoint: the entrypoint starts again on :func:`unpause_task`) and the task waits,
    paused, until it is unpaused. 400 for other task kinds and for a task that ended or is
    paused already. The allocations to wake after the commit."""
    _generic(task, "pause")
    if is_paused(task):
        raise FailedPreconditionError(
            f"cannot pause task {task.task_id} as it is in state 'PAUSED'"
        )
    if task.end_time is not None:
        raise FailedPreconditionError(
            f"cannot pause task {task.task_id} as it has ended (create it again, or fork it: "
            "det task create --fork)"
        )
    task.extra = {**(task.extra or {}), "paused": True}
    return stop_task(session, task, "user requested pause")


def unpause_task(session: Session, task: Task) -> None:
    """Unpause a paused generic task (``det task unpause``): a new allocation runs its
    entrypoint again from the start, in the queue like any other. 400 unless it is paused, and
    while its paused allocation is still stopping (try again once it has)."""
    _generic(task, "unpause")
    if not is_paused(task):
        raise FailedPreconditionError(
            f"cannot unpause task {task.task_id} as it is not in paused state"
        )
    live = session.scalar(
        select(Allocation.id).where(
            Allocation.task_id == task.task_id, Allocation.state.in_(LIVE_ALLOCATION_STATES)
        )
    )
    if live is not None:
        raise FailedPreconditionError(
            f"task {task.task_id} is still stopping ({live}); unpause it once it has stopped"
        )
    task.extra = {k: v for k, v in (task.extra or {}).items() if k != "paused"} or None
    task.end_time = None
    typed = task_config(task)
    start_allocation(
        session,
        task.task_id,
        slots=typed.slots,
        resource_pool=typed.resources.resource_pool or "default",
    )


def stop_task(session: Session, task: Task, reason: str) -> set[str]:
    """Stop ``task`` whoever asks (the master's idle timeout); the allocations to wake."""
    woken: set[str] = set()
    live = session.scalars(
        select(Allocation).where(
            Allocation.task_id == task.task_id, Allocation.state.in_(LIVE_ALLOCATION_STATES)
        )
    )
    for allocation in list(live):
        if allocation.state in UNSTARTED_ALLOCATION_STATES:
            allocation.exit_reason = reason
            set_allocation_state(session, allocation, "TERMINATED")
            release_slots(session, allocation.id)
        elif allocation.state != "TERMINATING":
            allocation.exit_reason = reason
            set_allocation_state(session, allocation, "TERMINATING")
            woken.add(allocation.id)
    if not woken and task.end_time is None:
        task.end_time = utcnow()
    return woken


def mark_ready(
    session: Session, allocation: Allocation, now: dt.datetime, os_user: str | None = None
) -> None:
    """The task's service answers: ``isReady``, and the idle clock starts at ``now``. A shell
    says which OS user its sshd logs in (``os_user``)."""
    if not allocation.is_ready:
        allocation.is_ready = True
        allocation.last_activity = now
    if os_user:
        task = session.get(Task, allocation.task_id)
        if task is not None and task.trial_id is None:
            task.extra = {**(task.extra or {}), "os_user": os_user}


def shell_user(session: Session, task: Task, owner: User | None) -> str:
    """The OS user to ssh into a shell as: what its sshd said once ready, else its owner's
    linked agent user, else ``root`` (an admin's task on a root agent)."""
    said = (task.extra or {}).get("os_user")
    if isinstance(said, str) and said:
        return said
    if owner is not None and owner.agent_user:
        return owner.agent_user
    return "root"


def report_idle(session: Session, task: Task, idle: bool, now: dt.datetime) -> None:
    """A notebook's idle report at ``now``; not idle counts as activity."""
    allocation = latest_allocation(session, task.task_id)
    if allocation is None or allocation.state == "TERMINATED":
        return
    allocation.idle = idle
    if not idle:
        allocation.last_activity = now


def note_activity(allocation: Allocation, now: dt.datetime) -> bool:
    """A user reached the task through the proxy at ``now``; whether it was written (at most
    once per few seconds per allocation)."""
    last = allocation.last_activity
    if last is not None and now - last < _ACTIVITY_RESOLUTION:
        return False
    allocation.last_activity = now
    return True


def idle_expired(session: Session, now: dt.datetime) -> list[Task]:
    """Running interactive tasks idle past their ``idle_timeout``: a notebook whose last
    report says idle, or any other task, with no proxied use for that long."""
    rows = session.execute(
        select(Task, Allocation)
        .join(Allocation, Allocation.task_id == Task.task_id)
        .where(
            Task.trial_id.is_(None),
            Task.config.is_not(None),
            Allocation.state == "RUNNING",
            Allocation.is_ready.is_(True),
        )
    ).all()
    out = []
    for task, allocation in rows:
        seconds = task_config(task).idle_seconds
        if seconds is None or allocation.last_activity is None:
            continue
        if task.task_type == "NOTEBOOK" and allocation.idle is not True:
            continue
        if (now - allocation.last_activity).total_seconds() >= seconds:
            out.append(task)
    return out
