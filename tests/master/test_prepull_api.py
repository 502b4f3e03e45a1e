"""The pre-pull plan on the agent side of the master: each sync answer carries the agent pool's
images (the manifest's defaults for the pool's slot type, then queued and active experiments'
images), ``GET /api/v1/prepull`` serves the whole plan, and the pull time agents report is
stored on the allocation and served with the task (``imagePullSeconds``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from stalwart.environments import load_manifest
from stalwart.environments.images import FRAMEWORKS
from stalwart.environments.prepull import PrepullSettings
from stalwart.master.app import create_app
from stalwart.master.clock import ManualClock
from stalwart.master.services.prepull import PrepullPlans
from tests.master.conftest import enroll, make_settings

CPU = {"slots": [{"id": "0", "device_type": "cpu"}], "containers": [], "resource_pool": "default"}
GPU = {
    "slots": [{"id": "0", "device_type": "cuda"}, {"id": "1", "device_type": "cuda"}],
    "containers": [],
    "resource_pool": "gpus",
}
CONFIG = (
    "name: pulled\nentrypoint: sleep 1\nmax_restarts: 0\n"
    "environment:\n  image:\n    cpu: team/cpu-image:7\n    cuda: team/gpu-image:7\n"
    "  force_pull_image: true\n"
    "  registry_auth:\n    username: team\n    password: s3cret\n"
    "    serveraddress: registry.example.com\n"
    "searcher:\n  name: single\n  metric: loss\n  max_length:\n    batches: 1\n"
)


def _defaults(device: str) -> list[str]:
    manifest = load_manifest()
    return list(dict.fromkeys(manifest.default_image(f, device)[1] for f in FRAMEWORKS))  # type: ignore[arg-type]


class _Master:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        state = client.app.state.master  # type: ignore[attr-defined]
        self.enrollment = str(state.agent_token)
        self.agents: dict[str, dict[str, str]] = {}
        login = client.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
        self.user = {"Authorization": f"Bearer {login.json()['token']}"}

    def sync(self, agent: str, body: dict[str, Any], wait: float = 0) -> dict[str, Any]:
        if agent not in self.agents:
            self.agents[agent] = enroll(self.client, agent, self.enrollment)
        answer = self.client.post(
            f"/api/v1/agents/{agent}/sync",
            json={**body, "wait_seconds": wait},
            headers=self.agents[agent],
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def create(self, config: str, pool: str = "default") -> int:
        if pool != "default":
            config += f"resources:\n  resource_pool: {pool}\n"
        created = self.client.post(
            "/api/v1/experiments",
            json={"config": config, "activate": True, "modelDefinition": []},
            headers=self.user,
        )
        assert created.status_code == 200, created.text
        return int(created.json()["experiment"]["id"])


def _manual_clock(client: TestClient) -> ManualClock:
    """Drive the master's clock by hand (the plan's refreshes read it)."""
    clock = ManualClock()
    client.app.state.master.clock = clock  # type: ignore[attr-defined]
    return clock


def test_each_agent_pool_is_sent_its_images_and_the_plan_follows_experiments(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path / "home", cluster={"prepull": {"refresh_seconds": 0.2}})
    with TestClient(create_app(settings, run_cluster=False)) as client:
        clock = _manual_clock(client)
        master = _Master(client)
        master.sync("cpu-1", CPU)
        master.sync("gpu-1", GPU)
        clock.advance(1.0)  # a pool new to the plan is picked up at most once a second
        assert master.sync("cpu-1", CPU)["prepull"] == _defaults("cpu")
        assert master.sync("gpu-1", GPU)["prepull"] == _defaults("cuda")

        master.create(CONFIG, pool="gpus")
        assert "team/gpu-image:7" not in master.sync("gpu-1", GPU)["prepull"]  # not yet ...
        clock.advance(0.25)  # ... until the plan's refresh interval (0.2 s) has passed
        assert master.sync("gpu-1", GPU)["prepull"] == [*_defaults("cuda"), "team/gpu-image:7"]
        assert "team/cpu-image:7" not in master.sync("cpu-1", CPU)["prepull"]

        plan = client.get("/api/v1/prepull", headers=master.user)
        assert plan.status_code == 200, plan.text
        body = plan.json()
        assert body["enabled"] is True
        assert body["pools"]["gpus"] == {
            "slotType": "cuda",
            "images": [*_defaults("cuda"), "team/gpu-image:7"],
        }
        assert body["pools"]["default"]["images"] == _defaults("cpu")
        client.cookies.clear()  # the login's session cookie
        assert client.get("/api/v1/prepull").status_code == 401


def test_without_defaults_only_experiment_images_are_planned_and_off_means_nothing(
    tmp_path: Path,
) -> None:
    bare = {"prepull": {"include_manifest_defaults": False, "refresh_seconds": 0.1}}
    with TestClient(
        create_app(make_settings(tmp_path / "a", cluster=bare), run_cluster=False)
    ) as c:
        clock = _manual_clock(c)
        master = _Master(c)
        master.sync("cpu-1", CPU)
        master.create(CONFIG)
        clock.advance(1.0)
        assert master.sync("cpu-1", CPU)["prepull"] == ["team/cpu-image:7"]
    off = {"prepull": {"enabled": False}}
    with TestClient(create_app(make_settings(tmp_path / "b", cluster=off), run_cluster=False)) as c:
        master = _Master(c)
        master.sync("cpu-1", CPU)
        master.create(CONFIG)
        assert master.sync("cpu-1", CPU)["prepull"] == []
        plan = c.get("/api/v1/prepull", headers=master.user).json()
        assert plan == {"enabled": False, "pools": {}}


def test_the_plan_is_recomputed_only_when_stale() -> None:
    computed: list[float] = []
    now = [0.0]

    def compute() -> dict[str, list[str]]:
        computed.append(now[0])
        return {"default": ["a:1"]}

    plans = PrepullPlans(PrepullSettings(refresh_seconds=30), compute, clock=lambda: now[0])
    assert plans.images("default") == ["a:1"]
    now[0] = 10.0
    assert plans.images("default") == ["a:1"]
    assert computed == [0.0]  # fresh: answered from memory
    assert plans.images("new-pool") == []  # a pool the plan lacks: recomputed once
    now[0] = 10.5
    assert plans.images("new-pool") == []  # ... and not again within the second
    assert computed == [0.0, 10.0]
    now[0] = 40.0
    plans.images("default")
    assert computed == [0.0, 10.0, 40.0]  # stale after refresh_seconds
    off = PrepullPlans(PrepullSettings(enabled=False), compute)
    assert off.images("default") == []
    assert computed == [0.0, 10.0, 40.0]


def test_the_pull_time_an_agent_reports_is_stored_and_served_with_the_task(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path / "home")
    with TestClient(create_app(settings)) as client:
        master = _Master(client)
        master.sync("cpu-1", CPU)
        master.create(CONFIG)
        (spec,) = master.sync("cpu-1", CPU, wait=10)["start"]
        assert spec["image"] == "team/cpu-image:7"
        assert spec["force_pull_image"] is True
        assert spec["registry_auth"] == {
            "username": "team",
            "password": "s3cret",
            "serveraddress": "registry.example.com",
        }
        mine = {"allocation_id": spec["allocation_id"], "rank": 0}
        master.sync("cpu-1", {**CPU, "containers": [{**mine, "state": "STARTING"}]})
        task = client.get(f"/api/v1/tasks/{spec['task_id']}", headers=master.user).json()
        assert task["task"]["allocations"][0]["imagePullSeconds"] is None
        pulled = {**mine, "state": "RUNNING", "pull_seconds": 12.3456}
        master.sync("cpu-1", {**CPU, "containers": [pulled]})
        task = client.get(f"/api/v1/tasks/{spec['task_id']}", headers=master.user).json()
        (allocation,) = task["task"]["allocations"]
        assert allocation["imagePullSeconds"] == 12.346
        assert allocation["state"] == "STATE_RUNNING"
