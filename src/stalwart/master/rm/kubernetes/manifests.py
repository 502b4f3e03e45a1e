"""The Kubernetes objects of one allocation, built by pure functions from a :class:`JobRequest`.

One allocation is (all labelled with :func:`allocation_labels`, all named :func:`job_name`):

- a ``batch/v1`` **Job**: ``parallelism = completions = pods`` (ceil(slots /
  max_slots_per_pod), one pod for a zero-slot task), ``completionMode: Indexed`` (each pod's
  ``JOB_COMPLETION_INDEX`` is its rank), ``backoffLimit: 0`` (Stalwart restarts trials itself),
  ``ttlSecondsAfterFinished`` so exit codes outlive a master restart;
- a **ConfigMap** (the task files): the launcher's environment (``envFrom``) and ``task.json``,
  a readable description of the task, mounted at :data:`TASK_FILES_DIR`;
- a **Secret** holding the allocation token, mounted read-only (mode 0400) at
  :data:`TOKEN_DIR` (the token never appears in an argv, an env var or a ConfigMap);
- with ``environment.registry_auth``, a ``kubernetes.io/dockerconfigjson`` **Secret** for the
  image pull.

Each pod's ``stalwart-task`` container runs the batch launcher (``python -m
stalwart.hpc.task``), as on Slurm: it asks the master for its rank's task spec, fetches the
model definition (a command's files) and runs the task: a trial, or an interactive task
(command, notebook, shell, TensorBoard; labelled with its kind as ``stalwart.dev/task-type``).
A task that serves something declares its ``DET_SERVICE_PORT`` as the container's
:data:`SERVICE_PORT_NAME` port; the master's proxy reaches it at the pod's IP.

The user's ``environment.pod_spec`` (already merged over the pool's
``cpu_pod_spec``/``gpu_pod_spec`` by the caller, the experiment's or task's config winning) is
the base the pod is built on (:mod:`stalwart.master.rm.kubernetes.podspec`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from stalwart.environments.registry import docker_config
from stalwart.hpc.task import MASTER_URL_VAR, TOKEN_FILE_NAME, TOKEN_FILE_VAR
from stalwart.master.rm.kubernetes.podspec import (
    TASK_CONTAINER,
    fold_user_container,
    strategic_merge,
)

__all__ = [
    "ALLOCATION_LABEL",
    "LABEL_PREFIX",
    "MANAGED_BY",
    "SERVICE_PORT_NAME",
    "TASK_FILES_DIR",
    "TOKEN_DIR",
    "WORK_DIR",
    "JobRequest",
    "allocation_labels",
    "allocation_objects",
    "config_map_manifest",
    "dns_name",
    "headless_service_manifest",
    "job_manifest",
    "job_name",
    "label_value",
    "pod_resources",
    "pod_slots",
    "registry_secret_manifest",
    "token_secret_manifest",
]

SlotType = Literal["cpu", "cuda", "rocm"]

LABEL_PREFIX = "stalwart.dev/"
ALLOCATION_LABEL = LABEL_PREFIX + "allocation"
MANAGED_BY = {"app.kubernetes.io/managed-by": "stalwart"}
SERVICE_PORT_NAME = "service"
"""The task container's port of an interactive task's service (the master's proxy reaches it at
the pod's IP)."""
TASK_FILES_DIR = "/etc/stalwart/task"
TOKEN_DIR = "/var/run/stalwart"
WORK_DIR = "/run/stalwart/work"
_GPU_RESOURCE = {"cuda": "nvidia.com/gpu", "rocm": "amd.com/gpu"}
_LABEL_OK = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_OK = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class JobRequest:
    """Everything the objects of one allocation are built from (no database, no HTTP)."""

    allocation_id: str
    task_id: str
    namespace: str
    image: str
    slot_type: SlotType
    slots: int
    max_slots_per_pod: int
    pool: str
    master_url: str
    python: str = "python3"
    user: str = ""
    workspace: str = ""
    experiment_id: int | None = None
    priority_class: str | None = None
    force_pull_image: bool = False
    registry_auth: Mapping[str, Any] | None = None
    pull_secrets: Sequence[str] = ()
    pod_spec: Mapping[str, Any] | None = None
    disabled_nodes: Sequence[str] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    cpu_per_slot: float = 1.0
    memory_per_slot: str | None = None
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    ttl_seconds: int = 3600
    task_type: str = "trial"
    """The ``stalwart.dev/task-type`` label: ``trial``, or an interactive task's kind in lower
    case (``command``, ``notebook``, ``shell``, ``tensorboard``, ``generic``)."""
    service_port: int | None = None
    """The port an interactive task's service listens on (``DET_SERVICE_PORT``), declared as the
    task container's ``service`` port; None for tasks that serve nothing."""


def label_value(text: str) -> str:
    """``text`` as a valid label value (at most 63 characters of ``[A-Za-z0-9_.-]``, starting
    and ending alphanumeric; a hash keeps shortened values distinct)."""
    value = _LABEL_OK.sub("-", text).strip("-_.")
    if len(value) > 63:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        value = value[:54].rstrip("-_.") + "-" + digest
    return value


def dns_name(text: str, prefix: str = "stalwart-") -> str:
    """A DNS-1123 label (lower-case alphanumerics and ``-``, at most 63) for ``text``."""
    value = _NAME_OK.sub("-", (prefix + text).lower()).strip("-")
    if len(value) > 63:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        value = value[:54].rstrip("-") + "-" + digest
    return value


def job_name(allocation_id: str) -> str:
    """The name of an allocation's Job, ConfigMap and token Secret."""
    return dns_name(allocation_id)


def allocation_labels(request: JobRequest) -> dict[str, str]:
    """Labels of every object of the allocation (its pods too): user, workspace, pool, task,
    allocation, experiment, plus ``extra_labels``."""
    labels = {
        **MANAGED_BY,
        ALLOCATION_LABEL: label_value(request.allocation_id),
        LABEL_PREFIX + "task": label_value(request.task_id),
        LABEL_PREFIX + "pool": label_value(request.pool),
        LABEL_PREFIX + "task-type": label_value(request.task_type),
    }
    if request.user:
        labels[LABEL_PREFIX + "user"] = label_value(request.user)
    if request.workspace:
        labels[LABEL_PREFIX + "workspace"] = label_value(request.workspace)
    if request.experiment_id is not None:
        labels[LABEL_PREFIX + "experiment"] = str(request.experiment_id)
    return {**{k: label_value(v) for k, v in request.extra_labels.items()}, **labels}


def pod_slots(slots: int, max_slots_per_pod: int) -> list[int]:
    """Slots of each pod: ceil(slots / max) pods, as even as possible (larger ones first);
    ``[0]`` for a task without slots."""
    if slots <= 0:
        return [0]
    pods = math.ceil(slots / max_slots_per_pod)
    base, extra = divmod(slots, pods)
    return [base + (1 if i < extra else 0) for i in range(pods)]


def _cpu_quantity(cpus: float) -> str:
    return f"{round(cpus * 1000)}m"


def pod_resources(request: JobRequest, slots: int) -> dict[str, dict[str, str]]:
    """The task container's resources for a pod of ``slots`` slots: GPUs as limits
    (``nvidia.com/gpu``, ``amd.com/gpu``), CPU slots as CPU (and memory) requests."""
    gpu = _GPU_RESOURCE.get(request.slot_type)
    if gpu is not None and slots > 0:
        out: dict[str, dict[str, str]] = {
            "limits": {gpu: str(slots)},
            "requests": {gpu: str(slots)},
        }
        if request.memory_per_slot:
            out["requests"]["memory"] = _scaled(request.memory_per_slot, slots)
        return out
    count = max(slots, 1)
    requests = {"cpu": _cpu_quantity(request.cpu_per_slot * count)}
    if request.memory_per_slot:
        requests["memory"] = _scaled(request.memory_per_slot, count)
    return {"requests": requests}


def _scaled(quantity: str, times: int) -> str:
    match = re.fullmatch(r"(\d+)([A-Za-z]*)", quantity.strip())
    if match is None or times == 1:
        return quantity
    return f"{int(match.group(1)) * times}{match.group(2)}"


def _affinity(request: JobRequest) -> dict[str, Any] | None:
    if not request.disabled_nodes:
        return None
    term = {
        "matchExpressions": [
            {
                "key": "kubernetes.io/hostname",
                "operator": "NotIn",
                "values": sorted(set(request.disabled_nodes)),
            }
        ]
    }
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def _pull_secret_names(request: JobRequest) -> list[str]:
    names = list(dict.fromkeys(request.pull_secrets))
    if request.registry_auth:
        names.append(job_name(request.allocation_id) + "-registry")
    return names


def _task_container(request: JobRequest, slots: int) -> dict[str, Any]:
    name = job_name(request.allocation_id)
    container: dict[str, Any] = {
        "name": TASK_CONTAINER,
        "image": request.image,
        "imagePullPolicy": "Always" if request.force_pull_image else "IfNotPresent",
        "command": [request.python, "-m", "stalwart.hpc.task"],
        "workingDir": WORK_DIR,
        "envFrom": [{"configMapRef": {"name": name}}],
        "resources": pod_resources(request, slots),
        "volumeMounts": [
            {"name": "stalwart-task-files", "mountPath": TASK_FILES_DIR, "readOnly": True},
            {"name": "stalwart-token", "mountPath": TOKEN_DIR, "readOnly": True},
            {"name": "stalwart-work", "mountPath": WORK_DIR},
            {"name": "stalwart-shm", "mountPath": "/dev/shm"},
        ],
    }
    if request.service_port is not None:
        container["ports"] = [
            {"name": SERVICE_PORT_NAME, "containerPort": request.service_port, "protocol": "TCP"}
        ]
    return container


def _pod_spec(request: JobRequest, slots: int) -> dict[str, Any]:
    name = job_name(request.allocation_id)
    user = dict(request.pod_spec or {})
    user_containers = [c for c in user.get("containers") or [] if isinstance(c, Mapping)]
    ours = _task_container(request, slots)
    folded = next((c for c in user_containers if c.get("name") == TASK_CONTAINER), None)
    if folded is not None:
        ours = fold_user_container(ours, folded)
    sidecars = [c for c in user_containers if c.get("name") != TASK_CONTAINER]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [ours, *sidecars],
        "volumes": [
            {"name": "stalwart-task-files", "configMap": {"name": name}},
            {"name": "stalwart-token", "secret": {"secretName": name, "defaultMode": 0o400}},
            {"name": "stalwart-work", "emptyDir": {}},
            {"name": "stalwart-shm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    if len(pod_slots(request.slots, request.max_slots_per_pod)) > 1:
        spec["subdomain"] = name  # <job>-<rank>.<job>.<namespace>.svc (the headless Service)
    base = {k: v for k, v in user.items() if k not in ("containers", "restartPolicy", "metadata")}
    merged = strategic_merge(base, spec)
    pull = _pull_secret_names(request)
    if pull:
        merged = strategic_merge(merged, {"imagePullSecrets": [{"name": n} for n in pull]})
    if request.priority_class and "priorityClassName" not in user:
        merged["priorityClassName"] = request.priority_class
    affinity = _affinity(request)
    if affinity is not None:
        merged = strategic_merge(merged, {"affinity": affinity})
    if request.node_selector:
        merged["nodeSelector"] = {**request.node_selector, **(user.get("nodeSelector") or {})}
    return merged


def job_manifest(request: JobRequest) -> dict[str, Any]:
    """The allocation's batch/v1 Job (see the module docstring)."""
    labels = allocation_labels(request)
    per_pod = pod_slots(request.slots, request.max_slots_per_pod)
    if len(set(per_pod)) > 1:
        raise ValueError(
            f"{request.slots} slots cannot be split evenly into pods of at most "
            f"{request.max_slots_per_pod}: use a multiple of the pod size"
        )
    user_meta = (request.pod_spec or {}).get("metadata")
    template_labels = dict(labels)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(request.allocation_id),
            "namespace": request.namespace,
            "labels": labels,
            "annotations": {LABEL_PREFIX + "allocation-id": request.allocation_id},
        },
        "spec": {
            "parallelism": len(per_pod),
            "completions": len(per_pod),
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": request.ttl_seconds,
            "template": {
                "metadata": {
                    "labels": template_labels,
                    "annotations": dict(user_meta.get("annotations") or {})
                    if isinstance(user_meta, Mapping)
                    else {},
                },
                "spec": _pod_spec(request, per_pod[0]),
            },
        },
    }


def config_map_manifest(request: JobRequest) -> dict[str, Any]:
    """The task files: the launcher's environment and ``task.json`` (nothing secret)."""
    name = job_name(request.allocation_id)
    described = {
        "allocation_id": request.allocation_id,
        "task_id": request.task_id,
        "image": request.image,
        "slot_type": request.slot_type,
        "slots": request.slots,
        "pods": len(pod_slots(request.slots, request.max_slots_per_pod)),
        "pool": request.pool,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": request.namespace,
            "labels": allocation_labels(request),
        },
        "data": {
            MASTER_URL_VAR: request.master_url,
            "STALWART_ALLOCATION_ID": request.allocation_id,
            TOKEN_FILE_VAR: f"{TOKEN_DIR}/{TOKEN_FILE_NAME}",
            "task.json": json.dumps(described, indent=2, sort_keys=True),
        },
    }


def token_secret_manifest(request: JobRequest, token: str) -> dict[str, Any]:
    """The Secret with the allocation token (file :data:`TOKEN_FILE_NAME`)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": job_name(request.allocation_id),
            "namespace": request.namespace,
            "labels": allocation_labels(request),
        },
        "data": {TOKEN_FILE_NAME: base64.b64encode(token.encode()).decode()},
    }


def registry_secret_manifest(request: JobRequest) -> dict[str, Any] | None:
    """The image pull Secret of ``environment.registry_auth`` (None without one): a
    ``.dockerconfigjson`` with the registry's ``auth`` (given, or user:password)."""
    auth = request.registry_auth
    if not auth:
        return None
    config = json.dumps(docker_config(auth), sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {
            "name": job_name(request.allocation_id) + "-registry",
            "namespace": request.namespace,
            "labels": allocation_labels(request),
        },
        "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()},
    }


def headless_service_manifest(request: JobRequest) -> dict[str, Any] | None:
    """For a multi-pod allocation, the headless Service that gives each pod the DNS name
    ``<job>-<rank>.<job>.<namespace>.svc`` (its rendezvous address); None for one pod."""
    if len(pod_slots(request.slots, request.max_slots_per_pod)) < 2:
        return None
    name = job_name(request.allocation_id)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": request.namespace,
            "labels": allocation_labels(request),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {ALLOCATION_LABEL: label_value(request.allocation_id)},
        },
    }


def allocation_objects(request: JobRequest, token: str) -> list[dict[str, Any]]:
    """Every object of the allocation, in creation order (the Job last: its pods need the
    others). Raises ValueError when its slots cannot be split into equal pods."""
    objects = [config_map_manifest(request), token_secret_manifest(request, token)]
    registry = registry_secret_manifest(request)
    if registry is not None:
        objects.append(registry)
    service = headless_service_manifest(request)
    if service is not None:
        objects.append(service)
    objects.append(job_manifest(request))
    return objects
