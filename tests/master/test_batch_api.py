"""The batch-job launcher's routes: `batch/start` and `batch/exit`, own allocation token only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.db.tables import Allocation, Container
from stalwart.master.rm.hpc import jobs
from stalwart.master.rm.hpc.settings import SlurmSettings
from stalwart.master.transitions import set_allocation_state
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import (
    add_trial,
    create_experiment,
    login_headers,
    master_state,
    task_headers,
)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    settings = make_settings(
        tmp_path / "home",
        resource_manager={"type": "slurm", "job_storage_root": str(tmp_path / "jobs")},
    )
    with TestClient(create_app(settings, run_cluster=False)) as client:
        yield client


def _claimed(http: TestClient) -> tuple[str, str]:
    """A trial's allocation claimed as a batch job: ``(allocation id, token)``."""
    state = master_state(http)
    env = add_trial(state, create_experiment(http, login_headers(http)))
    assert isinstance(state.settings.resource_manager, SlurmSettings)
    with state.sessions() as session:
        job = jobs.claim_batch(
            session,
            env.allocation_id,
            state.settings.resource_manager,
            master_url="http://head:8080",
            python="python3",
            cluster_id=state.cluster_id,
        )
    assert job is not None
    return job.allocation_id, job.token


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
