"""The batch-job launcher's routes: `batch/start` and `batch/exit`, own allocation token only,
on every engine that launches it (Slurm, PBS, Kubernetes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.db.tables import Allocation, Container, Task
from stalwart.master.rm.hpc import jobs
from stalwart.master.rm.hpc.settings import BatchSystemSettings
from stalwart.master.rm.kubernetes import allocations as k8s_rows
from stalwart.master.rm.kubernetes.settings import KubernetesSettings
from stalwart.master.services import log_policies
from stalwart.master.transitions import set_allocation_state
from tests.k8s.fake_api import FakeKube
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import (
    add_trial,
    create_experiment,
    login_headers,
    master_state,
    task_headers,
)


@pytest.fixture(params=["slurm", "pbs", "kubernetes"])
def http(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TestClient]:
    """A master of each launching engine (Kubernetes: against the fake API server, which
    nothing calls here: no cluster loop runs)."""
    with contextlib.ExitStack() as stack:
        engine: dict[str, object] = {
            "type": request.param,
            "job_storage_root": str(tmp_path / "jobs"),
        }
        if request.param == "kubernetes":
            kube = FakeKube()
            kube.start()
            stack.callback(kube.stop)
            kubeconfig = tmp_path / "kubeconfig"
            kubeconfig.write_text(kube.kubeconfig("stalwart"))
            engine = {"type": "kubernetes", "kubeconfig": str(kubeconfig)}
        settings = make_settings(tmp_path / "home", resource_manager=engine)
        yield stack.enter_context(TestClient(create_app(settings, run_cluster=False)))


def _claimed(http: TestClient) -> tuple[str, str]:
    """A trial's allocation claimed by the master's engine: ``(allocation id, token)``."""
    state = master_state(http)
    env = add_trial(state, create_experiment(http, login_headers(http)))
    engine = state.settings.resource_manager
    with state.sessions() as session:
        if isinstance(engine, KubernetesSettings):
            assert k8s_rows.claim(session, env.allocation_id, engine, cluster_id=state.cluster_id)
        else:
            assert isinstance(engine, BatchSystemSettings)
            job = jobs.claim_batch(
                session,
                env.allocation_id,
                engine,
                master_url="http://head:8080",
                python="python3",
                cluster_id=state.cluster_id,
            )
            assert job is not None
        row = session.get(Container, (env.allocation_id, 0))
        assert row is not None
        return env.allocation_id, str(row.spec["token"])


def test_containers_are_recorded_as_the_engine_that_runs_them(http: TestClient) -> None:
    allocation_id, _ = _claimed(http)
    state = master_state(http)
    engine = state.settings.resource_manager.type  # slurm, pbs, kubernetes
    with state.sessions() as session:
        allocation = session.get(Allocation, allocation_id)
        row = session.get(Container, (allocation_id, 0))
        assert allocation is not None
        assert row is not None
        assert (allocation.agent_id, row.agent_id) == (engine, engine)


def test_an_exit_report_is_recorded_with_its_code_and_reason(http: TestClient) -> None:
    """Kubernetes pods included: their launcher's report is the task's own word."""
    allocation_id, token = _claimed(http)
    url = f"/api/v1/allocations/{allocation_id}/batch"
    resp = http.post(f"{url}/start", json={"rank": 0, "node": "n1"}, headers=task_headers(token))
    assert resp.status_code == 200, resp.text
    body = {"rank": 0, "exitCode": 137, "reason": "killed by the OOM killer"}
    resp = http.post(f"{url}/exit", json=body, headers=task_headers(token))
    assert resp.status_code == 200, resp.text
    state = master_state(http)
    with state.sessions() as session:
        row = session.get(Container, (allocation_id, 0))
        assert row is not None
        assert (row.state, row.exit_code, row.exit_reason) == (
            "EXITED",
            137,
            "killed by the OOM killer",
        )
    resp = http.post(f"{url}/exit", json={"rank": 0, "exitCode": 0}, headers=task_headers(token))
    assert resp.status_code == 200  # a later word changes nothing: the first one wins
    with state.sessions() as session:
        row = session.get(Container, (allocation_id, 0))
        assert row is not None
        assert row.exit_code == 137


def test_an_agent_s_container_is_not_a_batch_container(http: TestClient) -> None:
    state = master_state(http)
    env = add_trial(state, create_experiment(http, login_headers(http)), agent_id="n1")
    with state.sessions() as session:
        session.add(
            Container(allocation_id=env.allocation_id, rank=0, agent_id="n1", state="RUNNING")
        )
        session.commit()
    url = f"/api/v1/allocations/{env.allocation_id}/batch/exit"
    resp = http.post(url, json={"rank": 0, "exitCode": 1}, headers=env.headers)
    assert resp.status_code == 404


def test_start_hands_out_the_spec_and_exit_records_the_code(http: TestClient) -> None:
    allocation_id, token = _claimed(http)
    url = f"/api/v1/allocations/{allocation_id}/batch"
    resp = http.post(f"{url}/start", json={"rank": 0, "node": "n1"}, headers=task_headers(token))
    assert resp.status_code == 200, resp.text
    spec = resp.json()["spec"]
    assert spec["token"] == token
    assert spec["allocation_id"] == allocation_id
    state = master_state(http)
    with state.sessions() as session:
        allocation = session.get(Allocation, allocation_id)
        assert allocation is not None
        assert allocation.state == "RUNNING"
    resp = http.post(f"{url}/exit", json={"rank": 0, "exitCode": 3}, headers=task_headers(token))
    assert resp.status_code == 200, resp.text
    with state.sessions() as session:
        row = session.get(Container, (allocation_id, 0))
        assert row is not None
        assert (row.state, row.exit_code) == ("EXITED", 3)


def test_only_the_allocations_own_token_opens_them(http: TestClient) -> None:
    allocation_id, _ = _claimed(http)
    _, other_token = _claimed(http)
    url = f"/api/v1/allocations/{allocation_id}/batch/start"
    assert http.post(url, json={}, headers=task_headers(other_token)).status_code == 403
    assert http.post(url, json={}, headers=login_headers(http)).status_code == 403
    assert http.post(url, json={}).status_code == 401


def test_an_allocation_being_killed_gets_no_spec(http: TestClient) -> None:
    allocation_id, token = _claimed(http)
    state = master_state(http)
    with state.sessions() as session:
        allocation = session.get(Allocation, allocation_id)
        assert allocation is not None
        set_allocation_state(session, allocation, "TERMINATING")
        session.commit()
    url = f"/api/v1/allocations/{allocation_id}/batch/start"
    resp = http.post(url, json={"rank": 0}, headers=task_headers(token))
    assert resp.status_code == 200
    assert resp.json()["spec"] is None


def test_specs_carry_the_pools_startup_hook_and_jobs_avoid_excluded_nodes(
    http: TestClient,
) -> None:
    """Every engine hands its tasks the pool's configured startup hook (the node's runner sources
    it); a batch job of a trial whose ``exclude_node`` log policy matched avoids that node."""
    state = master_state(http)
    env = add_trial(state, create_experiment(http, login_headers(http)))
    engine = state.settings.resource_manager
    with state.sessions() as session:
        task = session.get(Task, env.task_id)
        assert task is not None
        task.extra = {log_policies.EXCLUDED: {"node-9": {"BAD": "BAD node"}}}
        session.commit()
        hooks = {"default": "export FROM=pool"}
        if isinstance(engine, KubernetesSettings):
            assert k8s_rows.claim(
                session,
                env.allocation_id,
                engine,
                cluster_id=state.cluster_id,
                startup_hook_of=hooks.get,
            )
        else:
            assert isinstance(engine, BatchSystemSettings)
            job = jobs.claim_batch(
                session,
                env.allocation_id,
                engine,
                master_url="http://head:8080",
                python="python3",
                cluster_id=state.cluster_id,
                startup_hook_of=hooks.get,
            )
            assert job is not None
            assert job.request.exclude_nodes == ("node-9",)
        row = session.get(Container, (env.allocation_id, 0))
        assert row is not None
        assert row.spec["startup_hook"] == "export FROM=pool"
