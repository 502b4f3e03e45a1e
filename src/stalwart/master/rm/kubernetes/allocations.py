"""Kubernetes allocations in the database: claim, describe, record (no API calls here).

An allocation run on Kubernetes has one :class:`~stalwart.master.db.tables.Container` per pod
(rank = the pod's Job completion index) with ``agent_id`` :data:`K8S_AGENT`, its
:class:`~stalwart.agent.protocol.TaskSpec` stored as on agents (token included), and
``allocations.batch_job_id`` = the Job's name once the Job was created. Its life:

1. :func:`claim` (PENDING -> ASSIGNED, commits): token, ports, container rows and specs (the
   same builder as agent placement).
2. The manager creates the objects (:func:`job_request` +
   :mod:`~stalwart.master.rm.kubernetes.manifests`) outside any transaction, then
   :func:`record_created`; or :func:`reject` (the containers exit with the API's message;
   :func:`end_rejected` ends the allocation with ``retry=False``).
3. The manager's watch news move the rows (:func:`mark_pulling`, :func:`mark_running`,
   :func:`mark_exited`); the cluster loop ends the allocation once its containers exited.

Everything here flushes and leaves the commit to the caller unless it says otherwise.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.agent.protocol import DeviceType
from stalwart.environments.manifest import load_manifest
from stalwart.master.cluster.lifecycle import TrialExit, end_allocation
from stalwart.master.db.tables import (
    LIVE_CONTAINER_STATES,
    Allocation,
    Container,
    Experiment,
    Project,
    Task,
    User,
    Workspace,
    utcnow,
)
from stalwart.master.rm.kubernetes.manifests import JobRequest, job_name, pod_slots
from stalwart.master.rm.kubernetes.podspec import strategic_merge
from stalwart.master.rm.kubernetes.settings import K8S_AGENT, KubernetesSettings
from stalwart.master.services.allocations import LOOPBACK
from stalwart.master.services.auth import token_sha256
from stalwart.master.services.task_spec import (
    ContainerPlan,
    allocation_task_specs,
    assign_containers,
    ports_for,
)
from stalwart.master.transitions import LIVE_ALLOCATION_STATES, set_allocation_state

__all__ = [
    "K8S_AGENT",
    "claim",
    "end_rejected",
    "job_request",
    "live_allocations",
    "mark_exited",
    "mark_pulling",
    "mark_running",
    "pod_spec_of",
    "record_created",
    "reject",
    "uncreated",
]


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
) -> bool:
    """PENDING -> ASSIGNED with a token, ports and one container per pod; commits. False when
    the allocation is not PENDING or not a trial's."""
    allocation = session.get(Allocation, allocation_id)
    if allocation is None or allocation.state != "PENDING":
        return False
    slot_type: DeviceType = settings.pool_slot_type(allocation.resource_pool)
    per_pod = pod_slots(allocation.slots, settings.max_slots_per_pod)
    device: DeviceType = slot_type if allocation.slots > 0 else "cpu"
    gpu = device != "cpu"
    token = secrets.token_urlsafe(32)
    ports = ports_for(0)  # every pod has its own network namespace
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
    specs = allocation_task_specs(
        session,
        allocation,
        plans,
        token=token,
        ports=ports,
        device_type=device,
        cluster_id=cluster_id,
    )
    if specs is None:
        session.rollback()
        return False
    allocation.ports = {"offset": 0, **ports}
    allocation.token_sha256 = token_sha256(token)
    allocation.agent_id = K8S_AGENT
    assign_containers(session, allocation, specs, K8S_AGENT)
    return True


def pod_spec_of(
    config: Mapping[str, Any], defaults: Mapping[str, Any] | None, gpu: bool
) -> dict[str, Any]:
    """The user's pod spec: the pool's (or master's) ``task_container_defaults``
    ``gpu_pod_spec``/``cpu_pod_spec`` with the experiment's ``environment.pod_spec`` merged over
    it (strategic merge, the experiment winning)."""
    base = (defaults or {}).get("gpu_pod_spec" if gpu else "cpu_pod_spec") or {}
    mine = (config.get("environment") or {}).get("pod_spec") or {}
    return strategic_merge(base if isinstance(base, Mapping) else {}, mine)


def _pod_spec_body(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A PodSpec from a Pod-shaped pod_spec (``{metadata, spec}``) or a bare PodSpec."""
    if isinstance(pod.get("spec"), Mapping):
        out = dict(pod["spec"])
        if isinstance(pod.get("metadata"), Mapping):
            out["metadata"] = dict(pod["metadata"])
        return out
    return dict(pod)


def job_request(
    session: Session,
    allocation: Allocation,
    settings: KubernetesSettings,
    *,
    master_url: str,
    cluster_id: str,
    task_container_defaults: Mapping[str, Any] | None,
) -> JobRequest | None:
    """The :class:`JobRequest` of a claimed allocation (None when its rows are gone)."""
    found = session.execute(
        select(Experiment, User.username, Workspace.name)
        .join(Task, Task.experiment_id == Experiment.id)
        .outerjoin(User, User.id == Experiment.owner_id)
        .outerjoin(Project, Project.id == Experiment.project_id)
        .outerjoin(Workspace, Workspace.id == Project.workspace_id)
        .where(Task.task_id == allocation.task_id)
    ).one_or_none()
    row = session.get(Container, (allocation.id, 0))
    if found is None or row is None:
        return None
    experiment, username, workspace = found
    config = dict(experiment.config or {})
    spec = row.spec
    device: DeviceType = spec.get("device_type") or "cpu"
    image = str(spec.get("image") or "")
    if not image:
        image = load_manifest().default_image("pytorch", device)[1]
    environment = config.get("environment") or {}
    resources = config.get("resources") or {}
    priority = resources.get("priority")
    priority_class = settings.default_priority_class
    if isinstance(priority, int) and priority in settings.priority_classes:
        priority_class = settings.priority_classes[priority]
    user_pod = pod_spec_of(config, task_container_defaults, device != "cpu")
    return JobRequest(
        allocation_id=allocation.id,
        task_id=allocation.task_id,
        namespace=settings.workspace_namespaces.get(workspace or "", settings.namespace),
        image=image,
        slot_type=device,
        slots=allocation.slots,
        max_slots_per_pod=settings.max_slots_per_pod,
        pool=allocation.resource_pool,
        master_url=master_url,
        python=settings.python,
        user=username or "",
        workspace=workspace or "",
        experiment_id=experiment.id,
        priority_class=priority_class,
        force_pull_image=bool(environment.get("force_pull_image")),
        registry_auth=environment.get("registry_auth") or None,
        pull_secrets=tuple(settings.image_pull_secrets),
        pod_spec=_pod_spec_body(user_pod),
        disabled_nodes=tuple(settings.disabled_nodes),
        node_selector=settings.pool_node_selectors.get(allocation.resource_pool, {}),
        cpu_per_slot=settings.slot_resource_requests.cpu,
        memory_per_slot=settings.slot_resource_requests.memory,
        extra_labels={**settings.extra_pod_labels, "stalwart.dev/cluster": cluster_id},
        ttl_seconds=settings.job_ttl_seconds,
    )


def live_allocations(session: Session) -> list[Allocation]:
    """Every live allocation run on Kubernetes (claimed, not TERMINATED)."""
    return list(
        session.scalars(
            select(Allocation)
            .where(
                Allocation.agent_id == K8S_AGENT,
                Allocation.state.in_(LIVE_ALLOCATION_STATES),
            )
            .order_by(Allocation.id)
        )
    )


def uncreated(session: Session) -> list[str]:
    """Claimed allocations whose Job was never recorded as created (a master that stopped
    between the claim and the creation, or a creation that failed transiently), with a live
    container."""
    rows = session.scalars(
        select(Allocation.id)
        .join(Container, Container.allocation_id == Allocation.id)
        .where(
            Allocation.state == "ASSIGNED",
            Allocation.agent_id == K8S_AGENT,
            Allocation.batch_job_id.is_(None),
            Container.state == "ASSIGNED",
        )
        .distinct()
    )
    return sorted(rows)


def record_created(session: Session, allocation_id: str, name: str) -> bool:
    """Store the Job's name; False when the allocation is gone or already has one."""
    allocation = session.get(Allocation, allocation_id)
    if allocation is None or allocation.batch_job_id is not None:
        return False
    allocation.batch_job_id = name
    session.flush()
    return True


def reject(session: Session, allocation_id: str, message: str) -> None:
    """The Job cannot be created: the containers exit with ``message``."""
    mark_exited(session, allocation_id, None, message)


def end_rejected(session: Session) -> list[TrialExit]:
    """End the live allocations that never got a Job and whose containers exited (the API
    refused their objects): their trials error at once (``retry=False``)."""
    candidates = session.scalars(
        select(Allocation)
        .join(Container, Container.allocation_id == Allocation.id)
        .where(
            Allocation.state.in_(LIVE_ALLOCATION_STATES),
            Allocation.agent_id == K8S_AGENT,
            Allocation.batch_job_id.is_(None),
            Container.state == "EXITED",
        )
        .distinct()
    )
    exits = []
    for allocation in list(candidates):
        row = session.get(Container, (allocation.id, 0))
        exit_ = end_allocation(
            session, allocation, None, row.exit_reason if row else None, retry=False
        )
        if exit_ is not None:
            exits.append(exit_)
    return exits


def mark_pulling(session: Session, allocation: Allocation) -> bool:
    """Pods are on nodes, not all running yet: ASSIGNED -> PULLING."""
    if allocation.state == "ASSIGNED":
        return set_allocation_state(session, allocation, "PULLING")
    return False


def mark_running(session: Session, allocation: Allocation) -> bool:
    """Every pod runs: containers and allocation RUNNING (a TERMINATING one stays so)."""
    changed = False
    for row in session.scalars(
        select(Container).where(
            Container.allocation_id == allocation.id, Container.state.in_(("ASSIGNED", "STARTING"))
        )
    ):
        row.state = "RUNNING"
        changed = True
    if allocation.state in ("ASSIGNED", "PULLING", "STARTING"):
        set_allocation_state(session, allocation, "RUNNING")
        changed = True
    session.flush()
    return changed


def mark_exited(
    session: Session, allocation_id: str, exit_code: int | None, reason: str | None
) -> bool:
    """Every live container of the allocation exited with ``exit_code`` (first word wins)."""
    changed = False
    for row in session.scalars(
        select(Container).where(
            Container.allocation_id == allocation_id,
            Container.state.in_(LIVE_CONTAINER_STATES),
        )
    ):
        row.state = "EXITED"
        row.exit_code = exit_code
        row.exit_reason = reason
        row.exited_at = utcnow()
        changed = True
    session.flush()
    return changed
