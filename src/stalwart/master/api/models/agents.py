"""Wire models of the cluster view: agents, slots, tasks and allocations (wire doc 4.5, 5.4).

REQUIRED keys (the official client indexes them): ``v1Agent.id`` and ``slotStats`` (with
``typeStats`` and ``brandStats``); ``v1Container.id`` and ``state``; ``v1Task.taskId``,
``taskType``, ``allocations``, ``startTime``; ``v1Allocation.taskId``, ``state``,
``allocationId``, ``slots``; ``v1RendezvousInfo.addresses``, ``rank``, ``slots``;
``b64Tgz``; ``acceleratorData``. ``slots`` and ``containers`` of an agent are maps, not lists.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from stalwart.master.api.models.common import Pagination, WireModel, WireRequest

__all__ = [
    "RESOURCES_TYPE",
    "AcceleratorData",
    "AgentTokenInfo",
    "AllGatherRequest",
    "AllGatherResponse",
    "AllocationSummary",
    "DeviceList",
    "DeviceStats",
    "DisableRequest",
    "GetAgentResponse",
    "GetAgentTokensResponse",
    "GetAgentsResponse",
    "GetResourcePoolsResponse",
    "GetSlotResponse",
    "GetSlotsResponse",
    "GetTaskAcceleratorDataResponse",
    "GetTaskContextDirectoryResponse",
    "GetTaskResponse",
    "GetTasksResponse",
    "NotifyContainerRunningRequest",
    "PostAcceleratorDataRequest",
    "PreemptionSignalResponse",
    "PrioritySchedulerDetail",
    "QueueStats",
    "RendezvousInfoResponse",
    "ResourcePoolDetail",
    "ResourcesSummary",
    "RevokeAgentTokenResponse",
    "SlotStats",
    "V1Agent",
    "V1Allocation",
    "V1Container",
    "V1Device",
    "V1RendezvousInfo",
    "V1ResourcePool",
    "V1Slot",
    "V1Task",
]

RESOURCES_TYPE = "docker-container"
"""What ``DET_RESOURCES_TYPE`` says for agent-run containers (rendezvous via the master)."""


# --- agents and slots ---------------------------------------------------------------------------


class V1Device(WireModel):
    """``v1Device``."""

    id: int | None = Field(default=None, description="Device index on its agent.")
    brand: str | None = Field(default=None, description="Device brand (e.g. the GPU model).")
    uuid: str | None = Field(default=None, description="Device UUID.")
    type: str | None = Field(default=None, description="TYPE_CPU, TYPE_CUDA or TYPE_ROCM.")


class V1Container(WireModel):
    """``v1Container``: REQUIRED id and state."""

    id: str = Field(description="Container (resources) id.")
    state: str = Field(description="containerv1State, e.g. STATE_RUNNING.")
    parent: str | None = Field(default=None, description="The agent.")
    devices: list[V1Device] = Field(default_factory=list, description="Devices it holds.")
    permission_denied: bool = Field(default=False, description="Always false (no RBAC).")


class V1Slot(WireModel):
    """``v1Slot`` (all optional); ``container`` is null when the slot is free."""

    id: str | None = Field(default=None, description="Slot id.")
    device: V1Device | None = Field(default=None, description="The device.")
    enabled: bool | None = Field(default=None, description="Whether it may be scheduled.")
    draining: bool | None = Field(default=None, description="Disabled, letting work finish.")
    container: V1Container | None = Field(default=None, description="Its container, if any.")


class DeviceStats(WireModel):
    """``v1DeviceStats``: REQUIRED total, disabled, draining."""

    total: int = Field(default=0, description="Slots of this kind.")
    disabled: int = Field(default=0, description="Disabled slots.")
    draining: int = Field(default=0, description="Draining slots.")
    states: dict[str, int] = Field(default_factory=dict, description="Containers by state.")


class SlotStats(WireModel):
    """``v1SlotStats``: REQUIRED typeStats and brandStats (maps, possibly empty)."""

    type_stats: dict[str, DeviceStats] = Field(default_factory=dict, description="By type.")
    brand_stats: dict[str, DeviceStats] = Field(default_factory=dict, description="By brand.")


class V1Agent(WireModel):
    """``v1Agent``: REQUIRED id and slotStats."""

    id: str = Field(description="Agent id.")
    slot_stats: SlotStats = Field(description="Slot counts by device type and brand.")
    registered_time: str | None = Field(default=None, description="When it registered.")
    slots: dict[str, V1Slot] | None = Field(default=None, description="Slots by slot id.")
    containers: dict[str, V1Container] | None = Field(default=None, description="Containers by id.")
    resource_pools: list[str] = Field(default_factory=list, description="Its resource pool.")
    addresses: list[str] = Field(default_factory=list, description="Its addresses.")
    enabled: bool = Field(default=True, description="Whether it may be scheduled.")
    draining: bool = Field(default=False, description="Disabled, letting work finish.")
    version: str = Field(
        default="",
        description="The Determined version the agent speaks on the wire (the master's, as "
        "on Determined, where agent and master versions match).",
    )
    stalwart_version: str | None = Field(
        default=None, description="The agent's own Stalwart version (absent from Determined)."
    )


class GetAgentsResponse(WireModel):
    agents: list[V1Agent] = Field(default_factory=list, description="The agents.")
    pagination: Pagination = Field(default_factory=Pagination, description="Pagination.")


class GetAgentResponse(WireModel):
    agent: V1Agent = Field(description="The agent.")


class GetSlotsResponse(WireModel):
    slots: list[V1Slot] = Field(default_factory=list, description="The agent's slots.")


class GetSlotResponse(WireModel):
    slot: V1Slot = Field(description="The slot.")


class DisableRequest(WireRequest):
    """Body of ``agents/{id}/disable`` and ``agents/{id}/slots/{slot}/disable``."""

    agent_id: str | None = Field(default=None, description="Repeats the path.")
    slot_id: str | None = Field(default=None, description="Repeats the path (slots).")
    drain: bool | None = Field(default=None, description="Let running work finish.")


# --- agents' own tokens (a Stalwart extension; docs/security.md) ---------------------------------


class AgentTokenInfo(WireModel):
    """An agent's credential, as admins see it (never the token nor its hash)."""

    agent_id: str = Field(description="The agent id the token opens.")
    created_at: str = Field(description="When the agent enrolled (RFC 3339).")
    confirmed_at: str | None = Field(
        default=None,
        description="When the agent first synced with its token (null: not used yet; the "
        "enrollment token may still replace it).",
    )
    revoked_at: str | None = Field(
        default=None,
        description="When an admin forbade the agent id (null: the token is live).",
    )


class GetAgentTokensResponse(WireModel):
    """``GET /api/v1/agents/tokens`` (admins): every agent credential, by agent id."""

    agent_tokens: list[AgentTokenInfo] = Field(default_factory=list, description="By agent id.")


class RevokeAgentTokenResponse(WireModel):
    """``DELETE /api/v1/agents/{agent_id}/token`` (admins): what became of the credential."""

    agent_id: str = Field(description="The agent id.")
    reenroll: bool = Field(
        description="True: the credential was deleted and the id may enroll again; false: the "
        "id is forbidden until an admin lets it enroll again."
    )
    revoked_at: str | None = Field(
        default=None, description="When the id was forbidden (null after a re-enrollment)."
    )


# --- tasks and allocations ----------------------------------------------------------------------


class DeviceList(WireModel):
    """``ResourcesSummaryDevices``."""

    devices: list[V1Device] = Field(default_factory=list, description="Devices on one agent.")


class ResourcesSummary(WireModel):
    """``v1ResourcesSummary``: one container of an allocation."""

    resources_id: str = Field(description="Resources (container) id.")
    resources_type: str = Field(default=RESOURCES_TYPE, description="How it is run.")
    allocation_id: str = Field(description="Its allocation.")
    agent_devices: dict[str, DeviceList] = Field(
        default_factory=dict, description="Devices by agent id."
    )
    container_id: str = Field(description="Container id (the slot list joins on it).")


class AllocationSummary(WireModel):
    """``v1AllocationSummary`` (every field optional on the wire)."""

    task_id: str = Field(description="Task id.")
    allocation_id: str = Field(description="Allocation id.")
    name: str = Field(description="Task name.")
    registered_time: str | None = Field(default=None, description="When it was requested.")
    resource_pool: str = Field(description="Resource pool.")
    slots_needed: int = Field(description="Slots it asked for.")
    resources: list[ResourcesSummary] | None = Field(
        default=None, description="Its containers; null while unassigned."
    )
    scheduler_type: str = Field(default="priority", description="Scheduler.")
    priority: int | None = Field(default=None, description="Scheduling priority.")
    proxy_ports: list[Any] = Field(default_factory=list, description="No proxied ports.")


class GetTasksResponse(WireModel):
    allocation_id_to_summary: dict[str, AllocationSummary] = Field(
        default_factory=dict, description="Live allocations by id."
    )


class AllocationReadyRequest(WireRequest):
    """``v1AllocationReadyRequest`` (the official client sends ``allocationId``) plus
    Stalwart's ``stalwartOsUser``: the OS user a shell's sshd logs in."""

    allocation_id: str | None = Field(default=None, description="The allocation (ignored).")
    stalwart_os_user: str | None = Field(
        default=None, description="Shells: the OS user to ssh in as."
    )


class V1Allocation(WireModel):
    """``v1Allocation``: REQUIRED taskId, state, allocationId, slots."""

    task_id: str = Field(description="Task id.")
    state: str = Field(description="taskv1State, e.g. STATE_RUNNING.")
    allocation_id: str = Field(description="Allocation id.")
    slots: int = Field(description="Slots.")
    is_ready: bool | None = Field(default=None, description="Running and ready.")
    start_time: str | None = Field(default=None, description="Start (RFC 3339).")
    end_time: str | None = Field(default=None, description="End (RFC 3339).")
    exit_reason: str | None = Field(default=None, description="Why it ended.")
    status_code: int | None = Field(default=None, description="Exit code.")
    image_pull_seconds: float | None = Field(
        default=None,
        description="Stalwart: seconds spent pulling the image before the task started (the "
        "longest over its containers; null: nothing pulled, or not known).",
    )


class V1Task(WireModel):
    """``v1Task``: REQUIRED taskId, taskType, allocations, startTime."""

    task_id: str = Field(description="Task id.")
    task_type: str = Field(description="v1TaskType, e.g. TASK_TYPE_TRIAL.")
    allocations: list[V1Allocation] = Field(default_factory=list, description="Its runs.")
    start_time: str = Field(description="Creation time (RFC 3339).")
    end_time: str | None = Field(default=None, description="End (RFC 3339).")
    task_state: str | None = Field(
        default=None,
        description="v1GenericTaskState of a paused generic task (GENERIC_TASK_STATE_PAUSED, "
        "or STOPPING_PAUSED while its run stops); unset otherwise.",
    )


class GetTaskResponse(WireModel):
    task: V1Task = Field(description="The task.")


class GetTaskContextDirectoryResponse(WireModel):
    b64_tgz: str = Field(description="Base64 of the model definition .tar.gz; '' when none.")


class AcceleratorData(WireRequest):
    """``v1AcceleratorData`` (in and out)."""

    container_id: str | None = Field(default=None, description="Container id.")
    allocation_id: str | None = Field(default=None, description="Allocation id.")
    node_name: str | None = Field(default=None, description="Node (agent) name.")
    accelerator_type: str | None = Field(default=None, description="cpu, cuda or rocm.")
    accelerator_uuids: list[str] = Field(default_factory=list, description="Device UUIDs.")
    task_id: str | None = Field(default=None, description="Task id.")
    resource_pool: str | None = Field(default=None, description="Resource pool.")


class PostAcceleratorDataRequest(WireRequest):
    accelerator_data: AcceleratorData = Field(description="What the task found.")
    allocation_id: str | None = Field(default=None, description="Repeats the path.")


class GetTaskAcceleratorDataResponse(WireModel):
    accelerator_data: list[AcceleratorData] = Field(
        default_factory=list, description="One entry per allocation that reported."
    )


class V1RendezvousInfo(WireModel):
    addresses: list[str] = Field(description="Every container's address, in rank order.")
    rank: int = Field(description="The caller's container rank.")
    slots: list[int] = Field(description="Every container's slot count, in rank order.")


class RendezvousInfoResponse(WireModel):
    rendezvous_info: V1RendezvousInfo = Field(description="The rendezvous answer.")


class PreemptionSignalResponse(WireModel):
    preempt: bool = Field(description="Whether the allocation should stop early.")


class AllGatherRequest(WireRequest):
    allocation_id: str | None = Field(default=None, description="Repeats the path.")
    request_uuid: str = Field(description="This participant (retries reuse it).")
    num_peers: int = Field(default=1, description="How many participants to wait for.")
    data: Any = Field(default=None, description="This participant's data.")


class AllGatherResponse(WireModel):
    data: list[Any] = Field(default_factory=list, description="Every participant's data.")


class NotifyContainerRunningRequest(AllGatherRequest):
    rank: int | None = Field(default=None, description="Container rank.")
    node_name: str | None = Field(default=None, description="Node the container runs on.")


class QueueStats(WireModel):
    """``v1QueueStats`` of a pool."""

    queued_count: int = Field(default=0, description="Allocations waiting for slots.")
    scheduled_count: int = Field(default=0, description="Allocations holding slots.")


class PrioritySchedulerDetail(WireModel):
    """``v1ResourcePoolPrioritySchedulerDetail``."""

    preemption: bool = Field(description="Whether higher priorities preempt lower ones.")
    default_priority: int = Field(default=42, description="Priority of jobs that set none.")


class ResourcePoolDetail(WireModel):
    """``v1ResourcePoolDetail``: only ``priorityScheduler`` (no cloud providers)."""

    priority_scheduler: PrioritySchedulerDetail | None = Field(
        default=None, description="Set for priority-scheduled pools."
    )


class V1ResourcePool(WireModel):
    """``v1ResourcePool``; every field without a default is REQUIRED by the official client.

    Stalwart pools are static (``RESOURCE_POOL_TYPE_STATIC``): no cloud provider fields, no
    auxiliary containers."""

    name: str = Field(description="Pool name.")
    description: str = Field(default="", description="From the master config.")
    type: str = Field(default="RESOURCE_POOL_TYPE_STATIC", description="v1ResourcePoolType.")
    num_agents: int = Field(description="Connected agents serving the pool.")
    slots_available: int = Field(description="Enabled slots of its enabled agents.")
    slots_used: int = Field(description="Of those, slots an allocation holds.")
    slot_type: str = Field(description="devicev1Type: TYPE_CUDA, TYPE_ROCM or TYPE_CPU.")
    aux_container_capacity: int = Field(default=0, description="No auxiliary containers.")
    aux_containers_running: int = Field(default=0, description="No auxiliary containers.")
    default_compute_pool: bool = Field(description="Experiments that name no pool go here.")
    default_aux_pool: bool = Field(description="Same as defaultComputePool.")
    preemptible: bool = Field(default=False, description="No spot instances.")
    min_agents: int = Field(default=0, description="No auto-scaling.")
    max_agents: int = Field(default=0, description="No auto-scaling.")
    slots_per_agent: int | None = Field(default=None, description="Most slots on one agent.")
    aux_container_capacity_per_agent: int = Field(default=0, description="Unused.")
    scheduler_type: str = Field(description="v1SchedulerType of the pool.")
    scheduler_fitting_policy: str = Field(description="v1FittingPolicy of the pool.")
    location: str = Field(default="", description="Unused (cloud).")
    image_id: str = Field(default="", description="Unused (cloud).")
    instance_type: str = Field(default="", description="Unused (cloud).")
    master_url: str = Field(default="", description="Unused (cloud).")
    master_cert_name: str = Field(default="", description="Unused (cloud).")
    startup_script: str = Field(default="", description="Unused (cloud).")
    container_startup_script: str = Field(default="", description="Unused (cloud).")
    agent_docker_network: str = Field(default="", description="Unused (cloud).")
    agent_docker_runtime: str = Field(default="", description="Unused (cloud).")
    agent_docker_image: str = Field(default="", description="Unused (cloud).")
    agent_fluent_image: str = Field(default="", description="Unused (cloud).")
    max_idle_agent_period: float = Field(default=0.0, description="Unused (cloud).")
    max_agent_starting_period: float = Field(default=0.0, description="Unused (cloud).")
    details: ResourcePoolDetail = Field(
        default_factory=ResourcePoolDetail, description="Scheduler details."
    )
    accelerator: str | None = Field(default=None, description="Unused.")
    cluster_name: str = Field(description="The configured cluster name.")
    resource_manager_metadata: dict[str, str] = Field(default_factory=dict, description="Unused.")
    stats: QueueStats = Field(default_factory=QueueStats, description="Queue counts.")


class GetResourcePoolsResponse(WireModel):
    """``v1GetResourcePoolsResponse``."""

    resource_pools: list[V1ResourcePool] = Field(description="One page of pools.")
    pagination: Pagination = Field(description="Where this page is.")
