"""Checkpoints: the harness's report, describe, experiment / trial lists with every sort, and
delete / patch / metadata updates."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.master.db.tables import Allocation, Checkpoint, StorageBackend, Trial
from stalwart.master.services.metrics import report_metrics
from stalwart.master.state import MasterState
from stalwart.master.transitions import set_allocation_state
from tests.master.test_allocations_api import (
    CONFIG,
    TrialEnv,
    add_trial,
    make_trial,
    master_state,
)

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def report_body(env: TrialEnv, uuid: str, steps: int, **extra: Any) -> dict[str, Any]:
    """What ``core.CheckpointContext._report_checkpoint`` posts."""
    body: dict[str, Any] = {
        "allocationId": env.allocation_id,
        "metadata": {"steps_completed": steps, "framework": "torch"},
        "resources": {"metadata.json": "64", "model/": "0", "model/weights.pt": "1000"},
        "taskId": env.task_id,
        "training": {},
        "uuid": uuid,
        "reportTime": (T0 + dt.timedelta(minutes=steps)).isoformat(),
        "state": "STATE_COMPLETED",
        "storageId": None,
    }
    body.update(extra)
    return body


def report(client: TestClient, env: TrialEnv, uuid: str, steps: int, **extra: Any) -> None:
    resp = client.post(
        "/api/v1/checkpoints", json=report_body(env, uuid, steps, **extra), headers=env.headers
    )
    assert resp.status_code == 200, resp.text
    assert resp.json() == {}


def add_metrics(state: MasterState, trial_id: int, group: str, steps: int, **metrics: Any) -> None:
    """A metrics report of the trial's current run, stored by the ingest (averaged metrics)."""
    with state.sessions() as session:
        run_id = session.scalars(select(Trial.run_id).where(Trial.id == trial_id)).one()
        report_metrics(
            session,
            trial_id=trial_id,
            run_id=run_id,
            group=group,
            steps_completed=steps,
            avg_metrics=metrics,
        )


@pytest.fixture
def env(client: TestClient, admin: dict[str, str]) -> TrialEnv:
    return make_trial(client, master_state(client), admin)


def test_report_and_describe(client: TestClient, env: TrialEnv, admin: dict[str, str]) -> None:
    state = master_state(client)
    with state.sessions() as session:
        session.add(StorageBackend(id=7, config_sha256="x" * 64, config={"type": "shared_fs"}))
        session.commit()
    add_metrics(state, env.trial_id, "validation", 100, loss=0.25, acc=0.9)
    add_metrics(state, env.trial_id, "training", 100, loss=0.3)
    add_metrics(state, env.trial_id, "validation", 50, loss=0.5)
    report(client, env, "ck-1", 100, storageId=7)

    resp = client.get("/api/v1/checkpoints/ck-1", headers=env.headers)
    assert resp.status_code == 200
    ckpt = resp.json()["checkpoint"]
    for key in ("uuid", "state", "metadata", "resources", "training"):
        assert key in ckpt, key
    assert ckpt["state"] == "STATE_COMPLETED"
    assert ckpt["metadata"] == {"steps_completed": 100, "framework": "torch"}
    assert ckpt["resources"] == {"metadata.json": "64", "model/": "0", "model/weights.pt": "1000"}
    assert ckpt["taskId"] == env.task_id
    assert ckpt["allocationId"] == env.allocation_id
    assert ckpt["storageId"] == 7
    assert ckpt["reportTime"] == "2025-03-01T13:40:00Z"
    training = ckpt["training"]
    assert training["trialId"] == env.trial_id
    assert training["experimentId"] == env.experiment_id
    assert training["experimentConfig"]["searcher"]["metric"] == "loss"
    assert training["hparams"] == {"lr": 0.1}
    assert training["validationMetrics"] == {
        "avgMetrics": {"loss": 0.25, "acc": 0.9},
        "batchMetrics": None,
    }
    assert training["trainingMetrics"]["avgMetrics"] == {"loss": 0.3}
    assert training["searcherMetric"] == 0.25

    with state.sessions() as session:
        row = session.get(Checkpoint, "ck-1")
        trial = session.get(Trial, env.trial_id)
        assert row is not None
        assert trial is not None
        assert row.size == 1064
        assert row.steps_completed == 100
        assert trial.latest_checkpoint == "ck-1"
    assert client.get("/api/v1/checkpoints/nope", headers=admin).status_code == 404


def test_report_is_idempotent_and_latest_checkpoint_only_moves_forward(
    client: TestClient, env: TrialEnv
) -> None:
    report(client, env, "ck-2", 200)
    report(client, env, "ck-2", 200)
    report(client, env, "ck-1", 100)  # arrives late
    with master_state(client).sessions() as session:
        assert session.query(Checkpoint).count() == 2
        trial = session.get(Trial, env.trial_id)
        assert trial is not None
        assert trial.latest_checkpoint == "ck-2"


def test_an_ended_allocation_cannot_move_the_latest_checkpoint(
    client: TestClient, env: TrialEnv
) -> None:
    """An orphaned run (its agent was lost, the trial runs again elsewhere) keeps training; a
    checkpoint it reports would make the next run resume past metrics the master refused."""
    report(client, env, "ck-1", 100)
    state = master_state(client)
    with state.sessions() as session:
        allocation = session.get(Allocation, env.allocation_id)
        assert allocation is not None
        allocation.exit_reason = "agent a1 was lost (no sync for 3s)"
        for step in ("TERMINATING", "TERMINATED"):
            set_allocation_state(session, allocation, step)
        session.commit()
    resp = client.post(
        "/api/v1/checkpoints", json=report_body(env, "ck-2", 200), headers=env.headers
    )
    assert resp.status_code == 400, resp.text
    assert "has ended (agent a1 was lost" in resp.text
    report(client, env, "ck-1", 100)  # a retried report of what was accepted is still a no-op
    failed = report_body(env, "ck-3", 300, state="STATE_ERROR", resources={})
    assert client.post("/api/v1/checkpoints", json=failed, headers=env.headers).status_code == 200
    with state.sessions() as session:
        assert session.get(Checkpoint, "ck-2") is None
        trial = session.get(Trial, env.trial_id)
        assert trial is not None
        assert trial.latest_checkpoint == "ck-1"


def test_report_validation_and_access(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    other = make_trial(client, master_state(client), admin)
    body = report_body(env, "ck-x", 1)
    assert client.post("/api/v1/checkpoints", json=body).status_code == 401
    assert client.post("/api/v1/checkpoints", json=body, headers=other.headers).status_code == 403
    no_steps = report_body(env, "ck-x", 1, metadata={"framework": "torch"})
    resp = client.post("/api/v1/checkpoints", json=no_steps, headers=env.headers)
    assert resp.status_code == 400
    assert "steps_completed" in resp.json()["message"]
    bad_storage = report_body(env, "ck-x", 1, storageId=999)
    assert (
        client.post("/api/v1/checkpoints", json=bad_storage, headers=env.headers).status_code == 400
    )
    report(client, env, "ck-x", 1)
    taken = report_body(other, "ck-x", 1)
    assert client.post("/api/v1/checkpoints", json=taken, headers=other.headers).status_code == 409


@pytest.fixture
def listed(client: TestClient, admin: dict[str, str]) -> tuple[TrialEnv, TrialEnv]:
    """Two trials of one experiment, four checkpoints:

    ====  =====  =====  ====  =====
    uuid  trial  steps  loss  acc
    ====  =====  =====  ====  =====
    c-a   1      100    0.5   0.70
    c-b   1      200    0.2   0.90
    c-c   2      300    --    --
    c-d   2      150    0.3   0.95
    ====  =====  =====  ====  =====
    """
    state = master_state(client)
    first = make_trial(client, state, admin)
    second = add_trial(state, first.experiment_id)
    for env, uuid, steps, loss, acc in (
        (first, "c-a", 100, 0.5, 0.7),
        (first, "c-b", 200, 0.2, 0.9),
        (second, "c-c", 300, None, None),
        (second, "c-d", 150, 0.3, 0.95),
    ):
        if loss is not None:
            add_metrics(state, env.trial_id, "validation", steps, loss=loss, acc=acc)
        report(client, env, uuid, steps)
    return first, second


def uuids(client: TestClient, headers: dict[str, str], url: str, **params: Any) -> list[str]:
    resp = client.get(url, params=params, headers=headers)
    assert resp.status_code == 200, resp.text
    return [c["uuid"] for c in resp.json()["checkpoints"]]


def test_experiment_checkpoint_sorts(
    client: TestClient, admin: dict[str, str], listed: tuple[TrialEnv, TrialEnv]
) -> None:
    url = f"/api/v1/experiments/{listed[0].experiment_id}/checkpoints"
    assert uuids(client, admin, url) == ["c-a", "c-b", "c-d", "c-c"]  # by trial, report time
    assert uuids(client, admin, url, sortByAttr="SORT_BY_SEARCHER_METRIC") == [
        "c-b",
        "c-d",
        "c-a",
        "c-c",  # smaller loss is better; no metric goes last
    ]
    assert uuids(
        client, admin, url, sortByAttr="SORT_BY_SEARCHER_METRIC", orderBy="ORDER_BY_DESC"
    ) == ["c-a", "c-d", "c-b", "c-c"]
    assert uuids(client, admin, url, sortByAttr="SORT_BY_END_TIME") == ["c-a", "c-d", "c-b", "c-c"]
    assert uuids(
        client, admin, url, sortByAttr="SORT_BY_BATCH_NUMBER", orderBy="ORDER_BY_DESC"
    ) == ["c-c", "c-b", "c-d", "c-a"]
    assert uuids(client, admin, url, sortByAttr="SORT_BY_UUID", orderBy="ORDER_BY_DESC") == [
        "c-d",
        "c-c",
        "c-b",
        "c-a",
    ]
    assert uuids(client, admin, url, sortByAttr="SORT_BY_TRIAL_ID", orderBy="ORDER_BY_DESC") == [
        "c-c",
        "c-d",
        "c-b",
        "c-a",
    ]
    assert uuids(client, admin, url, sortByMetric="acc", orderBy="ORDER_BY_DESC") == [
        "c-d",
        "c-b",
        "c-a",
        "c-c",
    ]
    bad = client.get(url, params={"sortByAttr": "SORT_BY_COLOR"}, headers=admin)
    assert bad.status_code == 400


def test_searcher_metric_order_honours_smaller_is_better(
    client: TestClient, admin: dict[str, str]
) -> None:
    state = master_state(client)
    env = make_trial(client, state, admin, config=CONFIG + "  smaller_is_better: false\n")
    for uuid, steps, loss in (("x-1", 1, 0.1), ("x-2", 2, 0.9), ("x-3", 3, 0.5)):
        add_metrics(state, env.trial_id, "validation", steps, loss=loss)
        report(client, env, uuid, steps)
    url = f"/api/v1/experiments/{env.experiment_id}/checkpoints"
    assert uuids(client, admin, url, sortByAttr="SORT_BY_SEARCHER_METRIC") == ["x-2", "x-3", "x-1"]
    assert uuids(client, admin, url, sortByAttr="SORT_BY_SEARCHER_METRIC", limit=1) == ["x-2"]


def test_checkpoint_pagination_and_states(
    client: TestClient, admin: dict[str, str], listed: tuple[TrialEnv, TrialEnv]
) -> None:
    url = f"/api/v1/experiments/{listed[0].experiment_id}/checkpoints"
    first = client.get(url, params={"limit": 3}, headers=admin).json()
    assert first["pagination"] == {
        "offset": 0,
        "limit": 3,
        "startIndex": 0,
        "endIndex": 3,
        "total": 4,
    }
    rest = client.get(url, params={"limit": 3, "offset": 3}, headers=admin).json()
    assert [c["uuid"] for c in rest["checkpoints"]] == ["c-c"]
    assert rest["pagination"]["endIndex"] == 4
    client.request(
        "DELETE", "/api/v1/checkpoints", json={"checkpointUuids": ["c-a"]}, headers=admin
    )
    assert uuids(client, admin, url, states="STATE_COMPLETED") == ["c-b", "c-d", "c-c"]
    assert uuids(client, admin, url, states=["STATE_DELETED", "STATE_ERROR"]) == ["c-a"]


def test_trial_checkpoints(
    client: TestClient, admin: dict[str, str], listed: tuple[TrialEnv, TrialEnv]
) -> None:
    first, second = listed
    assert uuids(client, admin, f"/api/v1/trials/{second.trial_id}/checkpoints") == ["c-d", "c-c"]
    assert uuids(
        client,
        admin,
        f"/api/v1/trials/{first.trial_id}/checkpoints",
        sortByAttr="SORT_BY_SEARCHER_METRIC",
    ) == ["c-b", "c-a"]
    body = client.get(f"/api/v1/trials/{first.trial_id}/checkpoints", headers=admin).json()
    assert body["pagination"]["total"] == 2
    assert client.get("/api/v1/trials/9999/checkpoints", headers=admin).status_code == 404
    assert client.get("/api/v1/experiments/9999/checkpoints", headers=admin).status_code == 404
    assert client.get(f"/api/v1/trials/{first.trial_id}/checkpoints").status_code == 401


def test_delete_marks_checkpoints_deleted(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    report(client, env, "d-1", 1)
    report(client, env, "d-2", 2)
    missing = client.request(
        "DELETE", "/api/v1/checkpoints", json={"checkpointUuids": ["d-1", "nope"]}, headers=admin
    )
    assert missing.status_code == 404
    raw = json.dumps({"checkpointUuids": ["d-1", "d-2"]})  # no Content-Type, as the client
    resp = client.request("DELETE", "/api/v1/checkpoints", content=raw, headers=admin)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {}
    for uuid in ("d-1", "d-2"):
        got = client.get(f"/api/v1/checkpoints/{uuid}", headers=admin).json()["checkpoint"]
        assert got["state"] == "STATE_DELETED"
    again = client.request(
        "DELETE", "/api/v1/checkpoints", json={"checkpointUuids": ["d-1"]}, headers=admin
    )
    assert again.status_code == 200


def test_a_task_may_only_delete_its_own_checkpoints(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    other = make_trial(client, master_state(client), admin)
    report(client, env, "mine", 1)
    body = {"checkpointUuids": ["mine"]}
    resp = client.request("DELETE", "/api/v1/checkpoints", json=body, headers=other.headers)
    assert resp.status_code == 403
    resp = client.request("DELETE", "/api/v1/checkpoints", json=body, headers=env.headers)
    assert resp.status_code == 200


def test_patch_records_partial_and_full_deletion(client: TestClient, env: TrialEnv) -> None:
    report(client, env, "p-1", 1)
    report(client, env, "p-2", 2)
    body = {
        "checkpoints": [
            {"uuid": "p-1", "resources": {"resources": {"metadata.json": "64"}}},
            {"uuid": "p-2", "resources": {"resources": {}}},
        ]
    }
    resp = client.patch("/api/v1/checkpoints", json=body, headers=env.headers)
    assert resp.status_code == 200, resp.text
    one = client.get("/api/v1/checkpoints/p-1", headers=env.headers).json()["checkpoint"]
    assert one["state"] == "STATE_PARTIALLY_DELETED"
    assert one["resources"] == {"metadata.json": "64"}
    two = client.get("/api/v1/checkpoints/p-2", headers=env.headers).json()["checkpoint"]
    assert two["state"] == "STATE_DELETED"
    with master_state(client).sessions() as session:
        row = session.get(Checkpoint, "p-1")
        assert row is not None
        assert row.size == 64


def test_post_metadata_replaces_it(
    client: TestClient, env: TrialEnv, admin: dict[str, str]
) -> None:
    report(client, env, "m-1", 5)
    body = {
        "checkpoint": {
            "uuid": "m-1",
            "metadata": {"steps_completed": 5, "note": "best"},
            "resources": {},
            "training": {},
            "state": "STATE_UNSPECIFIED",
        }
    }
    resp = client.post("/api/v1/checkpoints/m-1/metadata", json=body, headers=admin)
    assert resp.status_code == 200, resp.text
    assert resp.json()["checkpoint"]["metadata"] == {"steps_completed": 5, "note": "best"}
    got = client.get("/api/v1/checkpoints/m-1", headers=admin).json()["checkpoint"]
    assert got["metadata"]["note"] == "best"
    assert got["state"] == "STATE_COMPLETED"
