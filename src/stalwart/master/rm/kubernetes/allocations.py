"""Kubernetes allocations in the database: claim and describe (no API calls here; the
bookkeeping shared with Slurm and PBS is :mod:`stalwart.master.rm.batchjobs`).

An allocation run on Kubernetes has one container per pod (rank = the pod's Job completion
index) with ``agent_id`` :data:`K8S_AGENT`, and ``allocations.batch_job_id`` = the Job's name
once the Job was created. :func:`claim` (PENDING -> ASSIGNED, commits) plans the pods and claims
it (:func:`~stalwart.master.rm.claim.claim_allocation`); :func:`job_request` describes what the
manager then creates (:mod:`~stalwart.master.rm.kubernetes.manifests`), from the trial's
experiment or from the interactive task's own config (commands, notebooks, shells,
TensorBoards: their image, pod spec and priority; their owner and workspace).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.agent.protocol import DeviceType
from stalwart.config.command import CommandConfig
from stalwart.config.environment import EnvironmentConfig
from stalwart.environments.manifest import load_manifest
from stalwart.master.db.tables import (
    Allocation,
    Container,
    Experiment,
    Project,
    Task,
    User,
    Workspace,
)
from stalwart.master.rm.claim import StartupHookOf, claim_allocation
from stalwart.master.rm.kubernetes.manifests import JobRequest, job_name, pod_slots
from stalwart.master.rm.kubernetes.podspec import strategic_merge
from stalwart.master.rm.kubernetes.settings import K8S_AGENT, KubernetesSettings
from stalwart.master.services.allocations import LOOPBACK
from stalwart.master.services.experiment_config import typed_config
from stalwart.master.services.task_spec import ContainerPlan, registry_auth_of

__all__ = ["K8S_AGENT", "claim", "job_request", "pod_spec_of"]


def _addresses(allocation_id: str, namespace: str, pods: int) -> list[str]:
    if pods == 1:
        return [LOOPBACK]
    name = job_name(allocation_id)
    return [f"{name}-{rank}.{name}.{namespace}.svc" for rank in range(pods)]


def claim(
    session: Session,
    allocation_id: str,
    settings: KubernetesSettings,
    *,
    cluster_id: str,
    startup_hook_of: StartupHookOf | None = None,
) -> bool:
    """PENDING -> ASSIGNED with a token, ports and one container per pod; commits. False when
    the allocation is not PENDING or its task (a trial, or an interactive task) is gone. Every
    pod has its own IP, so the ports are the bases (offset 0): an interactive task's
    ``DET_SERVICE_PORT`` is 12370 in every pod."""
    allocation = session.get(Allocation, allocation_id)
    if allocation is None or allocation.state != "PENDING":
        return False
    slot_type: DeviceType = settings.pool_slot_type(allocation.resource_pool)
    per_pod = pod_slots(allocation.slots, settings.max_slots_per_pod)
    device: DeviceType = slot_type if allocation.slots > 0 else "cpu"
    gpu = device != "cpu"
    addresses = _addresses(allocation.id, settings.namespace, len(per_pod))
    plans = [
        ContainerPlan(
            rank=rank,
            agent_id=K8S_AGENT,
            address=addresses[rank],
            slot_ids=tuple(str(i) for i in range(n)) if gpu else (),
            device_indices=tuple(range(n)) if gpu else (),
        )
        for rank, n in enumerate(per_pod)
    ]
    token = claim_allocation(
        session,
        allocation,
        plans,
        port_offset=0,  # every pod has its own network namespace
        device_type=device,
        cluster_id=cluster_id,
        startup_hook_of=startup_hook_of,
    )
    return token is not None


def pod_spec_of(
    pod_spec: Mapping[str, Any] | None, defaults: Mapping[str, Any] | None, gpu: bool
) -> dict[str, Any]:
    """The user's pod spec: the pool's (or master's) ``task_container_defaults``
    ``gpu_pod_spec``/``cpu_pod_spec`` with the experiment's ``environment.pod_spec`` merged over
    it (strategic merge, the experiment winning)."""
    base = (defaults or {}).get("gpu_pod_spec" if gpu else "cpu_pod_spec") or {}
    mine = pod_spec or {}
    return strategic_merge(base if isinstance(base, Mapping) else {}, mine)


def _pod_spec_body(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A PodSpec from a Pod-shaped pod_spec (``{metadata, spec}``) or a bare PodSpec."""
    if isinstance(pod.get("spec"), Mapping):
        out = dict(pod["spec"])
        if isinstance(pod.get("metadata"), Mapping):
            out["metadata"] = dict(pod["metadata"])
        return out
    return dict(pod)


@dataclass(frozen=True)
class _Source:
    """What a Job is built from besides the claimed container: the trial's experiment, or the
    interactive task itself."""

    environment: EnvironmentConfig
    priority: int | None
    username: str
    workspace: str
    experiment_id: int | None
    task_type: str
    serves: bool


_SERVING_KINDS = frozenset({"NOTEBOOK", "SHELL", "TENSORBOARD"})
"""Interactive kinds whose program listens on ``DET_SERVICE_PORT`` (the proxy's target)."""


def _source(session: Session, allocation: Allocation) -> _Source | None:
    task = session.get(Task, allocation.task_id)
    if task is None:
        return None
    if task.trial_id is None and task.config is not None:  # an interactive task
        command = CommandConfig.model_validate(task.config)
        owner = session.get(User, task.owner_id) if task.owner_id is not None else None
        space = session.get(Workspace, task.workspace_id or 1)
        return _Source(
            environment=command.environment,
            priority=command.resources.priority,
            username=owner.username if owner is not None else "",
            workspace=space.name if space is not None else "",
            experiment_id=None,
            task_type=task.task_type.lower(),
            serves=task.task_type in _SERVING_KINDS,
        )
    found = session.execute(
        select(Experiment, User.username, Workspace.name)
        .join(Task, Task.experiment_id == Experiment.id)
        .outerjoin(User, User.id == Experiment.owner_id)
        .outerjoin(Project, Project.id == Experiment.project_id)
        .outerjoin(Workspace, Workspace.id == Project.workspace_id)
        .where(Task.task_id == allocation.task_id)
    ).one_or_none()
    if found is None:
        return None
    experiment, username, workspace = found
    config = typed_config(experiment)
    return _Source(
        environment=config.environment,
        priority=config.resources.priority,
        username=username or "",
        workspace=workspace or "",
        experiment_id=experiment.id,
        task_type="trial",
        serves=False,
    )


def job_request(
    session: Session,
    allocation: Allocation,
    settings: KubernetesSettings,
    *,
    master_url: str,
    cluster_id: str,
    task_container_defaults: Mapping[str, Any] | None,
) -> JobRequest | None:
    """The :class:`JobRequest` of a claimed allocation, a trial's or an interactive task's
    (None when its rows are gone)."""
    source = _source(session, allocation)
    row = session.get(Container, (allocation.id, 0))
    if source is None or row is None:
        return None
    environment = source.environment
    spec = row.spec
    device: DeviceType = spec.get("device_type") or "cpu"
    image = str(spec.get("image") or "")
    if not image:
        image = load_manifest().default_image("pytorch", device)[1]
    priority = source.priority
    priority_class = settings.default_priority_class
    if priority is not None and priority in settings.priority_classes:
        priority_class = settings.priority_classes[priority]
    user_pod = pod_spec_of(environment.pod_spec, task_container_defaults, device != "cpu")
    port = (allocation.ports or {}).get("DET_SERVICE_PORT")
    return JobRequest(
        allocation_id=allocation.id,
        task_id=allocation.task_id,
        namespace=settings.workspace_namespaces.get(source.workspace, settings.namespace),
        image=image,
        slot_type=device,
        slots=allocation.slots,
        max_slots_per_pod=settings.max_slots_per_pod,
        pool=allocation.resource_pool,
        master_url=master_url,
        python=settings.python,
        user=source.username,
        workspace=source.workspace,
        experiment_id=source.experiment_id,
        priority_class=priority_class,
        force_pull_image=environment.force_pull_image,
        registry_auth=registry_auth_of(environment),
        pull_secrets=tuple(settings.image_pull_secrets),
        pod_spec=_pod_spec_body(user_pod),
        disabled_nodes=tuple(settings.disabled_nodes),
        node_selector=settings.pool_node_selectors.get(allocation.resource_pool, {}),
        cpu_per_slot=settings.slot_resource_requests.cpu,
        memory_per_slot=settings.slot_resource_requests.memory,
        extra_labels={**settings.extra_pod_labels, "stalwart.dev/cluster": cluster_id},
        ttl_seconds=settings.job_ttl_seconds,
        task_type=source.task_type,
        service_port=int(port) if source.serves and isinstance(port, int) else None,
    )
