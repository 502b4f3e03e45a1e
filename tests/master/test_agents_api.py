"""Agents, slots and tasks: ``det agent list`` / ``det slot list`` shapes, and the agent
service the agent resource manager and the scheduler use."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from stalwart.errors import FailedPreconditionError, InvalidArgumentError
from stalwart.master.app import create_app
from stalwart.master.db.tables import Allocation, Slot, Trial
from stalwart.master.services import agents as agent_service
from stalwart.master.services.allocations import container_id
from stalwart.master.state import MasterState
from stalwart.master.transitions import set_allocation_state, set_trial_state
from tests.master.conftest import login, make_settings
from tests.master.test_allocations_api import (
    TrialEnv,
    login_headers,
    make_trial,
    master_state,
)

GPUS = [("0", "cuda", "NVIDIA A100", "GPU-aaa"), ("1", "cuda", "NVIDIA A100", "GPU-bbb")]


def register(state: MasterState, agent_id: str, slots: list[tuple[str, str, str, str]]) -> None:
    with state.sessions() as session:
        agent_service.register_agent(
            session,
            agent_id,
            slots=slots,
            addresses=["10.0.0.1"],
            version="0.38.1",
            resource_pool="default",
        )
        session.commit()


@pytest.fixture
def busy(client: TestClient, admin: dict[str, str]) -> TrialEnv:
    """Agent ``gpu-1`` (2 GPUs, slot 0 held by a trial's allocation) and ``cpu-1`` (1 CPU)."""
    state = master_state(client)
    register(state, "gpu-1", GPUS)
    register(state, "cpu-1", [("0", "TYPE_CPU", "Intel", "")])
    env = make_trial(client, state, admin, slots=1)
    with state.sessions() as session:
        agent_service.assign_slots(session, "gpu-1", ["0"], env.allocation_id)
        session.commit()
    return env


def test_agents_need_credentials(client: TestClient) -> None:
    assert client.get("/api/v1/agents").status_code == 401
    assert client.get("/api/v1/tasks").status_code == 401


def test_agent_list_has_required_keys_and_slot_maps(
    client: TestClient, admin: dict[str, str], busy: TrialEnv
) -> None:
    body = client.get("/api/v1/agents", headers=admin).json()
    assert body["pagination"] == {
        "offset": 0,
        "limit": 0,
        "startIndex": 0,
        "endIndex": 2,
        "total": 2,
    }
    agents = {a["id"]: a for a in body["agents"]}
    gpu = agents["gpu-1"]
    for key in (
        "id",
        "slotStats",
        "version",
        "registeredTime",
        "slots",
        "containers",
        "resourcePools",
        "enabled",
        "draining",
        "addresses",
    ):
        assert key in gpu, key
    assert gpu["version"] == "0.38.1"
    assert gpu["resourcePools"] == ["default"]
    assert gpu["addresses"] == ["10.0.0.1"]
    assert set(gpu["slots"]) == {"0", "1"}
    held, free = gpu["slots"]["0"], gpu["slots"]["1"]
    assert free["container"] is None
    assert free["device"] == {
        "id": 1,
        "brand": "NVIDIA A100",
        "uuid": "GPU-bbb",
        "type": "TYPE_CUDA",
    }
    cid = container_id(busy.allocation_id)
    assert held["container"]["id"] == cid
    assert held["container"]["state"] == "STATE_ASSIGNED"
    assert list(gpu["containers"]) == [cid]
    stats = gpu["slotStats"]
    assert stats["typeStats"]["TYPE_CUDA"]["total"] == 2
    assert stats["typeStats"]["TYPE_CUDA"]["states"] == {"STATE_ASSIGNED": 1}
    assert stats["brandStats"]["NVIDIA A100"]["disabled"] == 0
    cpu = agents["cpu-1"]
    assert cpu["slots"]["0"]["device"]["type"] == "TYPE_CPU"
    assert cpu["containers"] == {}


def test_container_state_follows_the_allocation(
    client: TestClient, admin: dict[str, str], busy: TrialEnv
) -> None:
    with master_state(client).sessions() as session:
        allocation = session.get(Allocation, busy.allocation_id)
        assert allocation is not None
        set_allocation_state(session, allocation, "RUNNING")
        session.commit()
    slot = client.get("/api/v1/agents/gpu-1/slots/0", headers=admin).json()["slot"]
    assert slot["container"]["state"] == "STATE_RUNNING"


def test_agent_pagination_sorting_and_exclusions(
    client: TestClient, admin: dict[str, str], busy: TrialEnv
) -> None:
    page = client.get(
        "/api/v1/agents",
        params={"limit": 1, "offset": 1, "sortBy": "SORT_BY_ID", "orderBy": "ORDER_BY_DESC"},
        headers=admin,
    ).json()
    assert [a["id"] for a in page["agents"]] == ["cpu-1"]
    assert page["pagination"]["endIndex"] == 2
    assert page["pagination"]["total"] == 2
    slim = client.get(
        "/api/v1/agents",
        params={"excludeSlots": "true", "excludeContainers": "true"},
        headers=admin,
    ).json()["agents"][0]
    assert slim["slots"] is None
    assert slim["containers"] is None
    assert "slotStats" in slim


def test_one_agent_and_its_slots(client: TestClient, admin: dict[str, str], busy: TrialEnv) -> None:
    agent = client.get("/api/v1/agents/gpu-1", headers=admin).json()["agent"]
    assert agent["id"] == "gpu-1"
    slots = client.get("/api/v1/agents/gpu-1/slots", headers=admin).json()["slots"]
    assert [s["id"] for s in slots] == ["0", "1"]
    assert client.get("/api/v1/agents/nope", headers=admin).status_code == 404
    assert client.get("/api/v1/agents/nope/slots", headers=admin).status_code == 404
    assert client.get("/api/v1/agents/gpu-1/slots/9", headers=admin).status_code == 404


def test_tasks_summary_joins_slot_containers(
    client: TestClient, admin: dict[str, str], busy: TrialEnv
) -> None:
    state = master_state(client)
    pending = make_trial(client, state, admin, slots=4)
    summaries = client.get("/api/v1/tasks", headers=admin).json()["allocationIdToSummary"]
    assert set(summaries) == {busy.allocation_id, pending.allocation_id}
    running = summaries[busy.allocation_id]
    assert running["taskId"] == busy.task_id
    assert running["name"] == f"Trial {busy.trial_id} (Experiment {busy.experiment_id})"
    assert running["slotsNeeded"] == 1
    assert running["resourcePool"] == "default"
    assert running["registeredTime"].endswith("Z")
    (resources,) = running["resources"]
    slot = client.get("/api/v1/agents/gpu-1", headers=admin).json()["agent"]["slots"]["0"]
    assert resources["containerId"] == slot["container"]["id"]
    assert list(resources["agentDevices"]) == ["gpu-1"]
    assert summaries[pending.allocation_id]["resources"] is None

    with state.sessions() as session:
        allocation = session.get(Allocation, pending.allocation_id)
        assert allocation is not None
        set_allocation_state(session, allocation, "TERMINATED")
        session.commit()
    summaries = client.get("/api/v1/tasks", headers=admin).json()["allocationIdToSummary"]
    assert set(summaries) == {busy.allocation_id}


def test_one_task_with_its_allocations(
    client: TestClient, admin: dict[str, str], busy: TrialEnv
) -> None:
    task = client.get(f"/api/v1/tasks/{busy.task_id}", headers=admin).json()["task"]
    assert task["taskId"] == busy.task_id
    assert task["taskType"] == "TASK_TYPE_TRIAL"
    assert task["startTime"]
    (allocation,) = task["allocations"]
    assert allocation == allocation | {
        "taskId": busy.task_id,
        "allocationId": busy.allocation_id,
        "state": "STATE_QUEUED",
        "slots": 1,
    }
    assert client.get("/api/v1/tasks/nope", headers=admin).status_code == 404
    assert task["endTime"] is None


def test_a_trials_task_ends_with_the_trial(
    client: TestClient, admin: dict[str, str], busy: TrialEnv
) -> None:
    state: MasterState = client.app.state.master  # type: ignore[attr-defined]

    def move(to: str) -> str | None:
        with state.sessions() as session:
            trial = session.get(Trial, busy.trial_id)
            assert trial is not None
            set_trial_state(session, trial, to)
            session.commit()
        answer = client.get(f"/api/v1/tasks/{busy.task_id}", headers=admin).json()
        end: str | None = answer["task"]["endTime"]
        return end

    assert move("STOPPING_KILLED") is None
    assert move("CANCELED") is not None  # `det task list` shows when it ended


def test_enable_and_disable_need_an_admin(
    client: TestClient, admin: dict[str, str], busy: TrialEnv
) -> None:
    user = login_headers(client, "determined")
    assert client.post("/api/v1/agents/gpu-1/disable", json={}, headers=user).status_code == 403
    agent = client.post(
        "/api/v1/agents/gpu-1/disable", json={"agentId": "gpu-1", "drain": True}, headers=admin
    ).json()["agent"]
    assert (agent["enabled"], agent["draining"]) == (False, True)
    agent = client.post("/api/v1/agents/gpu-1/enable", headers=admin).json()["agent"]
    assert (agent["enabled"], agent["draining"]) == (True, False)
    slot = client.post("/api/v1/agents/gpu-1/slots/1/disable", headers=admin).json()["slot"]
    assert slot["enabled"] is False
    stats = client.get("/api/v1/agents/gpu-1", headers=admin).json()["agent"]["slotStats"]
    assert stats["typeStats"]["TYPE_CUDA"]["disabled"] == 1
    slot = client.post("/api/v1/agents/gpu-1/slots/1/enable", headers=admin).json()["slot"]
    assert slot["enabled"] is True


# --- the service ---------------------------------------------------------------------------------


def test_register_is_idempotent_and_keeps_assignments(client: TestClient, busy: TrialEnv) -> None:
    state = master_state(client)
    register(state, "gpu-1", [GPUS[0]])  # slot 1 disappeared; slot 0 is held
    with state.sessions() as session:
        slots = agent_service.slots_of(session, ["gpu-1"])["gpu-1"]
        assert [(s.slot_id, s.allocation_id) for s in slots] == [("0", busy.allocation_id)]
        register(state, "gpu-1", [])  # a held slot is never dropped
        assert session.get(Slot, ("gpu-1", "0")) is not None


def test_assign_and_release(client: TestClient, busy: TrialEnv, admin: dict[str, str]) -> None:
    state = master_state(client)
    second = make_trial(client, state, admin)
    with state.sessions() as session:
        assert [(s.agent_id, s.slot_id) for s in agent_service.free_slots(session)] == [
            ("cpu-1", "0"),
            ("gpu-1", "1"),
        ]
        with pytest.raises(FailedPreconditionError, match="held by"):
            agent_service.assign_slots(session, "gpu-1", ["1", "0"], second.allocation_id)
        assert session.get(Slot, ("gpu-1", "1")).allocation_id is None  # type: ignore[union-attr]
        with pytest.raises(FailedPreconditionError, match="no slot"):
            agent_service.assign_slots(session, "gpu-1", ["7"], second.allocation_id)
        agent_service.assign_slots(session, "gpu-1", ["1"], second.allocation_id)
        allocation = session.get(Allocation, second.allocation_id)
        assert allocation is not None
        assert allocation.agent_id == "gpu-1"
        assert agent_service.free_slots(session, resource_pool="default") == [
            session.get(Slot, ("cpu-1", "0"))
        ]
        assert agent_service.release_slots(session, second.allocation_id) == 1
        assert agent_service.release_slots(session, second.allocation_id) == 0
        agent_service.mark_disconnected(session, "cpu-1")
        assert [s.agent_id for s in agent_service.free_slots(session)] == ["gpu-1"]
        agent_service.heartbeat(session, "cpu-1")
        assert len(agent_service.free_slots(session)) == 2


def test_device_types_are_checked() -> None:
    assert agent_service.normalize_device_type("TYPE_ROCM") == "rocm"
    assert agent_service.normalize_device_type("gpu") == "cuda"
    with pytest.raises(InvalidArgumentError):
        agent_service.normalize_device_type("tpu")


# --- resource pools ---------------------------------------------------------------------------


def test_resource_pools_from_config_and_agents(
    client: TestClient, admin: dict[str, str], busy: TrialEnv
) -> None:
    state = master_state(client)
    with state.sessions() as session:
        agent_service.register_agent(
            session, "x-1", slots=[("0", "cpu", "", "")], resource_pool="extra"
        )
        session.commit()
    body = client.get("/api/v1/resource-pools", headers=admin).json()
    assert body["pagination"]["total"] == 2
    pools = {p["name"]: p for p in body["resourcePools"]}
    default = pools["default"]
    assert default["defaultComputePool"] is True
    assert default["defaultAuxPool"] is True
    assert (default["numAgents"], default["slotsAvailable"], default["slotsUsed"]) == (2, 3, 1)
    assert default["slotType"] == "TYPE_CUDA"
    assert default["slotsPerAgent"] == 2
    assert default["schedulerType"] == "SCHEDULER_TYPE_PRIORITY"
    assert default["schedulerFittingPolicy"] == "FITTING_POLICY_BEST"
    assert default["details"]["priorityScheduler"] == {"preemption": False, "defaultPriority": 42}
    assert default["type"] == "RESOURCE_POOL_TYPE_STATIC"
    assert default["stats"]["scheduledCount"] + default["stats"]["queuedCount"] == 1
    extra = pools["extra"]
    assert (extra["defaultComputePool"], extra["slotType"], extra["slotsAvailable"]) == (
        False,
        "TYPE_CPU",
        1,
    )
    page = client.get("/api/v1/resource-pools", params={"limit": 1}, headers=admin).json()
    assert [p["name"] for p in page["resourcePools"]] == ["default"]
    assert client.get("/api/v1/resource-pools").status_code == 401


def test_resource_pools_of_the_master_config(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path / "home",
        resource_pools=[
            {
                "pool_name": "fair",
                "description": "shared",
                "scheduler": {"type": "fair_share", "fitting_policy": "worst"},
            },
            {"pool_name": "default", "scheduler": {"type": "priority", "preemption": True}},
        ],
    )
    with TestClient(create_app(settings, run_cluster=False)) as client:
        headers = login(client, "admin")
        body = client.get("/api/v1/resource-pools", headers=headers).json()
    pools = {p["name"]: p for p in body["resourcePools"]}
    assert list(pools) == ["default", "fair"]
    fair = pools["fair"]
    assert (fair["description"], fair["numAgents"], fair["slotsAvailable"]) == ("shared", 0, 0)
    assert fair["schedulerType"] == "SCHEDULER_TYPE_FAIR_SHARE"
    assert fair["schedulerFittingPolicy"] == "FITTING_POLICY_WORST"
    assert fair["details"]["priorityScheduler"] is None
    assert pools["default"]["details"]["priorityScheduler"]["preemption"] is True
