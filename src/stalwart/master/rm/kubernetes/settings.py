"""The master config's ``resource_manager: {type: kubernetes, ...}`` section.

Pydantic only (no master or HTTP imports), so :mod:`stalwart.master.rm.hpc.settings` can list it
in the ``resource_manager`` union without importing the Kubernetes resource manager itself: the
master imports :mod:`stalwart.master.rm.kubernetes.manager` only when ``type: kubernetes`` is
configured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from stalwart.environments.prepull import PrepullSettings as PlanSettings

__all__ = ["K8S_AGENT", "KubernetesSettings", "PrepullSettings", "SlotResources"]

K8S_AGENT = "kubernetes"
"""``containers.agent_id`` (and ``allocations.agent_id``) of allocations run on Kubernetes."""


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlotResources(_Settings):
    """What one slot asks Kubernetes for (``slot_resource_requests``)."""

    cpu: float = Field(default=1.0, gt=0, description="CPUs requested per CPU slot.")
    memory: str | None = Field(
        default=None, description="Memory requested per slot (`4Gi`); None: nothing requested."
    )


class PrepullSettings(PlanSettings):
    """The image pre-pull DaemonSets (one per resource pool)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="Keep a pre-pull DaemonSet per pool.")
    pause_image: str = Field(
        default="registry.k8s.io/pause:3.9",
        description="The tiny container each pre-pull pod keeps running once its init "
        "containers pulled every image.",
    )
    priority_class: str | None = Field(
        default=None, description="priorityClassName of the pre-pull pods (None: none)."
    )


class KubernetesSettings(_Settings):
    """Allocations run as Kubernetes batch/v1 Jobs created by the master."""

    type: Literal["kubernetes"]
    namespace: str = Field(
        default="default", description="Namespace of the Jobs, ConfigMaps and DaemonSets."
    )
    workspace_namespaces: dict[str, str] = Field(
        default_factory=dict,
        description="Namespace of each workspace's trials, by workspace name (the namespace "
        "must exist, with the master's Role bound there too). Workspaces not listed use "
        "`namespace`; pre-pull DaemonSets stay in `namespace`.",
    )
    kubeconfig: Path | None = Field(
        default=None,
        description="A kubeconfig file to use (its current context). None: the pod's service "
        "account when the master runs in the cluster, else `$KUBECONFIG` or `~/.kube/config`.",
    )
    master_url: str = Field(
        default="",
        description="The master's URL as pods reach it (`http://stalwart-master.stalwart:8080`). "
        "Empty: `http://<host>:<port>` of the master's own settings.",
    )
    max_slots_per_pod: int = Field(
        default=8,
        ge=1,
        description="Most slots in one pod; an allocation of n slots gets ceil(n / this) pods.",
    )
    slot_type: Literal["cpu", "cuda", "rocm"] = Field(
        default="cuda",
        description="Slot type of pools without an entry in `pool_slot_types` (cuda: "
        "`nvidia.com/gpu`, rocm: `amd.com/gpu`, cpu: CPU requests per slot).",
    )
    pool_slot_types: dict[str, Literal["cpu", "cuda", "rocm"]] = Field(
        default_factory=dict, description="Slot type per resource pool name."
    )
    pool_node_selectors: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="nodeSelector of each pool's pods (and of its pre-pull DaemonSet).",
    )
    slot_resource_requests: SlotResources = Field(
        default_factory=SlotResources, description="What each slot requests."
    )
    python: str = Field(
        default="python3",
        description="Python in the task images that runs the launcher "
        "(`python -m stalwart.hpc.task`); the images need Stalwart installed.",
    )
    image_pull_secrets: list[str] = Field(
        default_factory=list,
        description="Secrets (kubernetes.io/dockerconfigjson) for every task pod, besides the "
        "experiment's `environment.registry_auth`.",
    )
    default_priority_class: str | None = Field(
        default=None,
        description="priorityClassName of pods whose experiment sets no `resources.priority`.",
    )
    priority_classes: dict[int, str] = Field(
        default_factory=dict,
        description="priorityClassName per `resources.priority` value (an existing "
        "PriorityClass of the cluster). A priority without an entry gets "
        "`default_priority_class`.",
    )
    disabled_nodes: list[str] = Field(
        default_factory=list,
        description="Nodes no task may use (node affinity `kubernetes.io/hostname NotIn`).",
    )
    extra_pod_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels added to every task pod."
    )
    job_ttl_seconds: int = Field(
        default=3600,
        ge=0,
        description="ttlSecondsAfterFinished of the Jobs: how long a finished Job (and its "
        "exit codes) outlives its end, so a master that was down still reads them.",
    )
    gang_timeout_seconds: float = Field(
        default=600.0,
        gt=0,
        description="A multi-pod allocation whose pods are not all running this long after the "
        "first one started is killed and retried (all-or-nothing).",
    )
    api_qps: float = Field(
        default=20.0, gt=0, description="Most Kubernetes API calls per second (the queue)."
    )
    api_burst: int = Field(default=40, ge=1, description="Calls allowed at once above the rate.")
    prepull: PrepullSettings = Field(
        default_factory=PrepullSettings, description="Image pre-pull DaemonSets."
    )

    def namespaces(self) -> list[str]:
        """Every namespace the master creates task objects in (``namespace`` first)."""
        return list(dict.fromkeys([self.namespace, *self.workspace_namespaces.values()]))

    def pool_slot_type(self, pool: str) -> Literal["cpu", "cuda", "rocm"]:
        """The slot type of resource pool ``pool``."""
        return self.pool_slot_types.get(pool, self.slot_type)
