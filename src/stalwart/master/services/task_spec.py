"""The task contract of a trial's container: its command, environment and info files.

:func:`trial_task_specs` builds one :class:`~stalwart.agent.protocol.TaskSpec` per container of
a placed allocation, following the wire doc (5.2 environment, 5.3 info files) so that both
Stalwart's harness and the official ``determined`` harness find what they read. What depends on
the node (``DET_MASTER`` as that node reaches the master, ``DET_AGENT_ID``, ``DET_RUN_DIR``) is
added by the agent's runner. Who the task runs as on the node (:func:`run_as_of`, and whether
its owner is an admin) travels in the spec; the agent decides from it (``docs/security.md``).

Ports: each allocation gets its own block of the Determined port bases (``C10D_PORT`` and
friends), chosen by :func:`free_port_offset` so that allocations sharing an agent never collide.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.agent.protocol import DeviceType, RunAs, TaskSpec
from stalwart.config.command import CommandConfig
from stalwart.config.environment import EnvironmentConfig
from stalwart.environments.prepull import experiment_image
from stalwart.master.db.tables import (
    Allocation,
    Checkpoint,
    Experiment,
    Project,
    Task,
    Trial,
    User,
    Workspace,
)
from stalwart.master.services.allocations import container_id
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.interactive import tensorboard_sources
from stalwart.master.services.trials import registered_storage_id

__all__ = [
    "PORT_BASES",
    "ContainerPlan",
    "allocation_task_specs",
    "entrypoint_argv",
    "free_port_offset",
    "interactive_task_specs",
    "ports_for",
    "registry_auth_of",
    "run_as_of",
    "trial_task_specs",
]

PORT_BASES: Mapping[str, int] = {
    "DTRAIN_SSH_PORT": 12350,
    "INTER_TRAIN_PROCESS_COMM_PORT_1": 12360,
    "INTER_TRAIN_PROCESS_COMM_PORT_2": 12365,
    "C10D_PORT": 29400,
    "DET_SERVICE_PORT": 12370,
}
"""Determined's port bases, and Stalwart's port of an interactive task's service (a notebook,
TensorBoard or shell listens there; the master's proxy forwards to it); an allocation with
offset ``k`` gets ``base + k`` for each."""

_MAX_PORT_OFFSET = 5
"""Offsets go 0..4 per base before the next base's range (12350 + 4 < 12360)."""

_LEGACY_TRIAL = re.compile(r"^[a-zA-Z0-9_.]+:[a-zA-Z0-9_]+$")


@dataclass(frozen=True)
class ContainerPlan:
    """One container of a placement: its rank, agent, address, slot ids and device indices."""

    rank: int
    agent_id: str
    address: str
    slot_ids: tuple[str, ...]
    device_indices: tuple[int, ...]


def free_port_offset(used: Iterable[int], first: int = 0) -> int:
    """The smallest port offset from ``first`` on that is not in ``used`` (offsets of live
    allocations on the same agents); ``first`` is the master's ``cluster.task_port_offset``.

    Beyond the spacing of Determined's bases, offsets continue in steps of 100 above each base's
    block (``base + 100 * k``), so any number of allocations on one agent get distinct ports.
    """
    taken = set(used)
    offset = first
    while offset in taken:
        offset += 1
    return offset


def ports_for(offset: int) -> dict[str, int]:
    """The ports of an allocation with ``offset`` (see :func:`free_port_offset`)."""
    block, index = divmod(offset, _MAX_PORT_OFFSET)
    return {name: base + 100 * block + index for name, base in PORT_BASES.items()}


def entrypoint_argv(entrypoint: Any, python: str = "python3") -> list[str]:
    """The command of a config ``entrypoint`` (wire doc 5.4).

    A legacy ``pkg.mod:ClassName`` runs Determined's torch_distributed launcher (it needs the
    ``determined`` package in the task's Python); any other string runs under ``sh -c``; a list
    is run as given.
    """
    if isinstance(entrypoint, list) and entrypoint:
        return [str(part) for part in entrypoint]
    if isinstance(entrypoint, str) and entrypoint.strip():
        if _LEGACY_TRIAL.match(entrypoint):
            return [python, "-m", "determined.launch.torch_distributed", "--trial", entrypoint]
        return ["sh", "-c", entrypoint]
    raise ValueError("the experiment has no entrypoint: set `entrypoint` in its config")


def _user_environment(environment: EnvironmentConfig, device: DeviceType) -> dict[str, str]:
    env_vars = environment.environment_variables
    entries = {"cpu": env_vars.cpu, "cuda": env_vars.cuda, "rocm": env_vars.rocm}[device]
    out: dict[str, str] = {}
    for entry in entries:
        key, _, value = str(entry).partition("=")
        if key:
            out[key] = value
    return out


def registry_auth_of(environment: EnvironmentConfig) -> dict[str, str] | None:
    """``environment.registry_auth``'s set fields as strings (None without credentials)."""
    auth = environment.registry_auth
    if auth is None:
        return None
    given = {k: str(v) for k, v in auth.to_dict().items() if v not in (None, "")}
    return given or None


def run_as_of(owner: User | None, workspace: Workspace | None = None) -> RunAs | None:
    """The OS user a task of ``owner`` in ``workspace`` runs as: the workspace's agent user
    when it has one (it wins, as in Determined), else the owner's linked agent user, if any."""
    for holder in (workspace, owner):
        if holder is None:
            continue
        linked = (holder.agent_uid, holder.agent_user, holder.agent_gid, holder.agent_group)
        if all(value in (None, "") for value in linked):
            continue
        return RunAs(
            uid=holder.agent_uid,
            user=holder.agent_user or "",
            gid=holder.agent_gid,
            group=holder.agent_group or "",
        )
    return None


def allocation_task_specs(
    session: Session,
    allocation: Allocation,
    containers: Sequence[ContainerPlan],
    *,
    token: str,
    ports: Mapping[str, int],
    device_type: DeviceType,
    cluster_id: str,
    startup_hook: str | None = None,
) -> list[TaskSpec] | None:
    """The specs of an allocation's containers, read from the database: a trial's (one query
    for the trial, its experiment, owner and workspace; one for its latest checkpoint) or an
    interactive task's (:func:`interactive_task_specs`); None when the task is gone. Used by
    agent placement and by batch (Slurm, PBS, Kubernetes) submission. Every spec carries
    ``startup_hook`` (the pool's configured one), which the node sources before the command.
    """
    task = session.get(Task, allocation.task_id)
    if task is not None and task.trial_id is None and task.config is not None:
        owner = session.get(User, task.owner_id) if task.owner_id is not None else None
        specs = interactive_task_specs(
            session,
            task,
            allocation,
            containers,
            token=token,
            ports=ports,
            device_type=device_type,
            cluster_id=cluster_id,
            owner=owner,
        )
        return [spec.model_copy(update={"startup_hook": startup_hook}) for spec in specs]
    found = session.execute(
        select(Trial, Experiment, User, Workspace, Experiment.model_definition.is_not(None))
        .join(Task, Task.trial_id == Trial.id)
        .join(Experiment, Experiment.id == Trial.experiment_id)
        .outerjoin(User, User.id == Experiment.owner_id)
        .outerjoin(Project, Project.id == Experiment.project_id)
        .outerjoin(Workspace, Workspace.id == Project.workspace_id)
        .where(Task.task_id == allocation.task_id)
    ).one_or_none()
    if found is None:
        return None
    trial, experiment, owner, workspace, has_context = found
    latest = session.get(Checkpoint, trial.latest_checkpoint) if trial.latest_checkpoint else None
    warm_start = False
    if latest is None and trial.warm_start_checkpoint:
        # a trial without a checkpoint of its own starts from its warm-start checkpoint, with
        # no steps completed (Determined's buildTaskSpecifier)
        latest = session.get(Checkpoint, trial.warm_start_checkpoint)
        warm_start = True
    specs = trial_task_specs(
        experiment=experiment,
        trial=trial,
        allocation=allocation,
        token=token,
        containers=containers,
        container_ids=[container_id(allocation.id, c.rank) for c in containers],
        device_type=device_type,
        cluster_id=cluster_id,
        owner=owner,
        ports=ports,
        latest=latest if latest is not None and latest.state == "COMPLETED" else None,
        warm_start=warm_start,
        has_context=bool(has_context),
        workspace=workspace,
        storage_id=registered_storage_id(session, experiment.config.get("checkpoint_storage")),
    )
    return [spec.model_copy(update={"startup_hook": startup_hook}) for spec in specs]


def _cluster_info(
    cluster_id: str,
    plan: ContainerPlan,
    allocation: Allocation,
    token: str,
    task_type: str,
    *,
    latest_checkpoint: str | None = None,
) -> dict[str, Any]:
    """``cluster.json`` of one container (wire doc 5.3; the agent fills ``master_url``)."""
    return {
        "master_url": "",
        "cluster_id": cluster_id,
        "agent_id": plan.agent_id,
        "slot_ids": list(plan.device_indices),
        "task_id": allocation.task_id,
        "allocation_id": allocation.id,
        "session_token": token,
        "task_type": task_type,
        "master_cert_name": None,
        "master_cert_file": None,
        "latest_checkpoint": latest_checkpoint,
    }


def trial_task_specs(
    *,
    experiment: Experiment,
    trial: Trial,
    allocation: Allocation,
    token: str,
    containers: Sequence[ContainerPlan],
    container_ids: Sequence[str],
    device_type: DeviceType,
    cluster_id: str,
    owner: User | None,
    ports: Mapping[str, int],
    latest: Checkpoint | None,
    has_context: bool,
    workspace: Workspace | None = None,
    warm_start: bool = False,
    storage_id: int | None = None,
) -> list[TaskSpec]:
    """One spec per container of a trial's allocation (ranks in ``containers`` order); tasks
    run as :func:`run_as_of` the owner in ``workspace`` (the experiment's). ``storage_id``:
    the experiment's checkpoint storage's id when registered (``STALWART_STORAGE_ID``)."""
    config = experiment.config  # the stored JSON, handed to the task as is
    username = owner.username if owner is not None else ""
    typed = typed_config(experiment)
    environment = typed.environment
    argv = entrypoint_argv(typed.entrypoint)
    steps = int(latest.steps_completed or 0) if latest is not None and not warm_start else 0
    addresses = [c.address for c in containers]
    slot_counts = [len(c.slot_ids) for c in containers]
    base_env = {
        **_user_environment(environment, device_type),
        "DET_CLUSTER_ID": cluster_id,
        "DET_TASK_ID": trial.task_id,
        "DET_ALLOCATION_ID": allocation.id,
        "DET_SESSION_TOKEN": token,
        "DET_TASK_TYPE": "TRIAL",
        "DET_TRIAL_ID": str(trial.id),
        "DET_EXPERIMENT_ID": str(experiment.id),
        "DET_TRIAL_RUN_ID": str(trial.run_id),
        "DET_TRIAL_SEED": str(trial.seed),
        "DET_HPARAMS": json.dumps(trial.hparams),
        "DET_EXPERIMENT_CONFIG": json.dumps(config),
        "DET_STEPS_COMPLETED": str(steps),
        "DET_USER": username,
        "DET_RESOURCES_TYPE": "docker-container",
        "DET_SEGMENT_ENABLED": "false",
        "DET_TASK_LOGGING_METADATA": json.dumps(
            {"task_id": trial.task_id, "allocation_id": allocation.id}
        ),
        **{name: str(port) for name, port in ports.items()},
    }
    if latest is not None:
        base_env["DET_LATEST_CHECKPOINT"] = latest.uuid
    if storage_id is not None:
        base_env["STALWART_STORAGE_ID"] = str(storage_id)
    trial_info = {
        "trial_id": trial.id,
        "experiment_id": experiment.id,
        "trial_seed": trial.seed,
        "hparams": trial.hparams,
        "config": config,
        "steps_completed": steps,
        "trial_run_id": trial.run_id,
        "debug": typed.debug,
        "inter_node_network_interface": None,
    }
    specs = []
    for plan, cid in zip(containers, container_ids, strict=True):
        slot_indices = list(plan.device_indices)
        cluster_info = _cluster_info(
            cluster_id,
            plan,
            allocation,
            token,
            "TRIAL",
            latest_checkpoint=latest.uuid if latest is not None else None,
        )
        rendezvous = {
            "container_addrs": addresses,
            "container_rank": plan.rank,
            "container_slot_counts": slot_counts,
        }
        env = {
            **base_env,
            "DET_SLOT_IDS": json.dumps(slot_indices),
            "DET_RESOURCES_ID": cid,
            "DET_CONTAINER_ID": cid,
        }
        specs.append(
            TaskSpec(
                allocation_id=allocation.id,
                task_id=trial.task_id,
                rank=plan.rank,
                container_id=cid,
                slot_ids=list(plan.slot_ids),
                device_type=device_type,
                image=experiment_image(typed, device_type) or "",
                force_pull_image=environment.force_pull_image,
                registry_auth=registry_auth_of(environment),
                argv=argv,
                env=env,
                info_files={
                    "cluster.json": json.dumps(cluster_info),
                    "trial.json": json.dumps(trial_info),
                    "rendezvous.json": json.dumps(rendezvous),
                    "resources.json": json.dumps({"gpu_uuids": []}),
                },
                has_context=has_context,
                token=token,
                user=username,
                run_as=run_as_of(owner, workspace),
                privileged=owner is not None and owner.admin,
            )
        )
    return specs


def _interactive_argv(task: Task, config: CommandConfig) -> list[str]:
    """What an interactive task runs: its entrypoint, or Stalwart's program for its kind."""
    program = _PROGRAMS.get(task.task_type)
    if program is None:
        entrypoint = config.entrypoint
        if isinstance(entrypoint, list) and len(entrypoint) == 1:
            entrypoint = entrypoint[0]  # `det cmd run 'a | b'`: one word, a shell line
        return entrypoint_argv(entrypoint)
    extra = list(config.tensorboard_args) if task.task_type == "TENSORBOARD" else []
    return ["python3", "-m", program, *extra]


_PROGRAMS: Mapping[str, str] = {
    "NOTEBOOK": "stalwart.tasks.notebook",
    "SHELL": "stalwart.tasks.shell",
    "TENSORBOARD": "stalwart.tasks.tensorboard",
}
"""The in-task programs (:mod:`stalwart.tasks`) of the kinds that serve something."""


def interactive_task_specs(
    session: Session,
    task: Task,
    allocation: Allocation,
    containers: Sequence[ContainerPlan],
    *,
    token: str,
    ports: Mapping[str, int],
    device_type: DeviceType,
    cluster_id: str,
    owner: User | None,
) -> list[TaskSpec]:
    """One spec per container of an interactive task's allocation (the contract of
    :mod:`stalwart.tasks`)."""
    config = CommandConfig.model_validate(task.config or {})
    environment = config.environment
    secrets = task.secrets or {}
    service_port = str(ports["DET_SERVICE_PORT"])
    env = {
        **_user_environment(environment, device_type),
        "DET_CLUSTER_ID": cluster_id,
        "DET_TASK_ID": task.task_id,
        "DET_ALLOCATION_ID": allocation.id,
        "DET_SESSION_TOKEN": token,
        "DET_TASK_TYPE": task.task_type,
        "DET_USER": owner.username if owner is not None else "",
        "DET_RESOURCES_TYPE": "docker-container",
        "DET_SEGMENT_ENABLED": "false",
        "DET_TASK_LOGGING_METADATA": json.dumps(
            {"task_id": task.task_id, "allocation_id": allocation.id}
        ),
        "DET_SERVICE_PORT": service_port,
    }
    if task.task_type == "NOTEBOOK":
        env |= {
            "NOTEBOOK_PORT": service_port,
            "DET_NOTEBOOK_TOKEN": str(secrets.get("notebook_token", "")),
            "NOTEBOOK_IDLE_TYPE": config.notebook_idle_type,
        }
    elif task.task_type == "SHELL":
        env["DET_SHELL_AUTHORIZED_KEYS"] = str(secrets.get("public_key", ""))
    elif task.task_type == "TENSORBOARD":
        env["TENSORBOARD_PORT"] = service_port
        if owner is not None:
            env["DET_TENSORBOARD_SOURCES"] = json.dumps(
                tensorboard_sources(session, owner, task.extra or {})
            )
    argv = _interactive_argv(task, config)
    image = _command_image(config, device_type)
    specs = []
    for plan in containers:
        cid = container_id(allocation.id, plan.rank)
        cluster_info = _cluster_info(cluster_id, plan, allocation, token, task.task_type)
        specs.append(
            TaskSpec(
                allocation_id=allocation.id,
                task_id=task.task_id,
                rank=plan.rank,
                container_id=cid,
                slot_ids=list(plan.slot_ids),
                device_type=device_type,
                image=image,
                force_pull_image=environment.force_pull_image,
                registry_auth=registry_auth_of(environment),
                argv=argv,
                env={
                    **env,
                    "DET_SLOT_IDS": json.dumps(list(plan.device_indices)),
                    "DET_RESOURCES_ID": cid,
                    "DET_CONTAINER_ID": cid,
                },
                info_files={
                    "cluster.json": json.dumps(cluster_info),
                    "resources.json": json.dumps({"gpu_uuids": []}),
                },
                has_context=task.context is not None,
                token=token,
                user=owner.username if owner is not None else "",
                run_as=run_as_of(
                    owner,
                    session.get(Workspace, task.workspace_id) if task.workspace_id else None,
                ),
                privileged=owner is not None and owner.admin,
            )
        )
    return specs


def _command_image(config: CommandConfig, device: DeviceType) -> str:
    if config.slots == 0:
        device = "cpu"
    images = config.environment.image
    named = {"cpu": images.cpu, "cuda": images.cuda, "rocm": images.rocm}[device]
    return named.strip() if named else ""
