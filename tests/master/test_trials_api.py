"""Trials API: get, kill, workloads, progress, runner state, early exit, runs, run metadata."""

from __future__ import annotations

import datetime as dt

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from stalwart.master.db.tables import Allocation, Checkpoint, Experiment, StorageBackend, Trial
from tests.master.test_experiments_api import (
    TRIAL_KEYS,
    add_trial,
    master,
    new_experiment,
    report,
    row,
)


def task_headers(token: str | None) -> dict[str, str]:
    assert token is not None
    return {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}


def add_checkpoint(client: TestClient, trial_id: int, uuid: str, steps: int, state: str) -> None:
    """A checkpoint row as the checkpoints endpoints write it."""
    with master(client).sessions() as session:
        trial = session.get(Trial, trial_id)
        assert trial is not None
        session.add(
            Checkpoint(
                uuid=uuid,
                task_id=trial.task_id,
                trial_id=trial_id,
                experiment_id=trial.experiment_id,
                state=state,
                report_time=dt.datetime(2025, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=steps),
                resources={"model.pt": 100, "metadata.json": "20"},
                metadata_={"steps_completed": steps},
                steps_completed=steps,
                size=120,
            )
        )
        session.commit()


# --- get ------------------------------------------------------------------------------------


def test_get_trial(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, token, _ = add_trial(client, exp_id, allocation="STARTING")
    assert report(client, admin, trial, run, "training", 50, {"loss": 0.4}).status_code == 200
    add_checkpoint(client, trial, "ck-1", 50, "COMPLETED")
    body = client.get(f"/api/v1/trials/{trial}", headers=task_headers(token)).json()["trial"]
    for key in TRIAL_KEYS:
        assert key in body, key
    assert body["experimentId"] == exp_id
    assert body["hparams"] == {"lr": 0.1}
    assert body["state"] == "STATE_STARTING"
    assert body["totalBatchesProcessed"] == 50
    assert body["taskId"]
    assert body["latestValidation"] is None  # the harness reads .get("latestValidation") or {}
    assert body["checkpointCount"] == 1
    assert body["totalCheckpointSize"] == "120"
    assert body["wallClockTime"] >= 0
    assert client.get("/api/v1/trials/999", headers=admin).status_code == 404
    assert client.get(f"/api/v1/trials/{trial}").status_code == 401
    bad = {"Grpc-Metadata-x-allocation-token": "Bearer nope"}
    assert client.get(f"/api/v1/trials/{trial}", headers=bad).status_code == 401


# --- kill -----------------------------------------------------------------------------------


def test_kill_trial(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    running, _, _, alloc = add_trial(client, exp_id, allocation="RUNNING")
    idle, *_ = add_trial(client, exp_id)
    assert client.post(f"/api/v1/trials/{running}/kill", headers=admin).json() == {}
    assert row(client, Trial, running).state == "STOPPING_KILLED"
    assert row(client, Allocation, alloc).state == "TERMINATING"
    assert client.post(f"/api/v1/trials/{idle}/kill", headers=admin).status_code == 200
    assert row(client, Trial, idle).state == "CANCELED"
    assert row(client, Trial, idle).end_time is not None
    assert client.post(f"/api/v1/trials/{idle}/kill", headers=admin).status_code == 200
    assert row(client, Experiment, exp_id).state == "ACTIVE"  # the searcher decides
    assert client.post("/api/v1/trials/999/kill", headers=admin).status_code == 404
    assert client.post(f"/api/v1/trials/{idle}/kill").status_code == 401


# --- workloads ------------------------------------------------------------------------------


def test_workloads_merge_by_batches(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, *_ = add_trial(client, exp_id)
    for steps in (10, 20, 30):
        assert (
            report(client, admin, trial, run, "training", steps, {"loss": 1 / steps}).status_code
            == 200
        )
    assert report(client, admin, trial, run, "validation", 20, {"loss": 0.3}).status_code == 200
    assert report(client, admin, trial, run, "custom", 25, {"x": 1}).status_code == 200
    add_checkpoint(client, trial, "ck-20", 20, "COMPLETED")
    add_checkpoint(client, trial, "ck-5", 5, "ACTIVE")
    body = client.get(f"/api/v1/trials/{trial}/workloads", headers=admin).json()
    kinds = []
    for container in body["workloads"]:
        (kind,) = [k for k in ("training", "validation", "checkpoint") if container.get(k)]
        kinds.append((kind, container[kind]["totalBatches"]))
    assert kinds == [
        ("checkpoint", 5),
        ("training", 10),
        ("training", 20),
        ("validation", 20),
        ("checkpoint", 20),
        ("training", 30),
    ]
    batches = [b for _, b in kinds]
    assert batches == sorted(batches)  # e2e asserts non-decreasing
    assert body["pagination"]["total"] == 6
    checkpoint = body["workloads"][4]["checkpoint"]
    assert checkpoint["state"] == "STATE_COMPLETED"
    assert checkpoint["uuid"] == "ck-20"
    assert checkpoint["resources"] == {"model.pt": "100", "metadata.json": "20"}
    training = body["workloads"][1]["training"]
    assert set(training) >= {"metrics", "numInputs", "totalBatches", "endTime"}
    assert training["metrics"]["avgMetrics"] == {"loss": 0.1}


def test_workloads_pages_and_filters(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, *_ = add_trial(client, exp_id)
    for steps in range(1, 8):
        report(client, admin, trial, run, "training", steps * 10, {"loss": 1.0})
    report(client, admin, trial, run, "validation", 40, {"loss": 0.5})
    add_checkpoint(client, trial, "ck", 40, "COMPLETED")
    url = f"/api/v1/trials/{trial}/workloads"
    seen: list[int] = []
    offset = 0
    while True:  # the CLI's read_paginated loop
        page = client.get(f"{url}?limit=3&offset={offset}", headers=admin).json()
        seen += [next(v for v in w.values() if v)["totalBatches"] for w in page["workloads"]]
        if page["pagination"]["endIndex"] >= page["pagination"]["total"]:
            break
        offset = page["pagination"]["endIndex"]
    assert seen == [10, 20, 30, 40, 40, 40, 50, 60, 70]
    desc = client.get(f"{url}?orderBy=ORDER_BY_DESC&limit=2", headers=admin).json()
    assert [next(v for v in w.values() if v)["totalBatches"] for w in desc["workloads"]] == [70, 60]
    only = client.get(f"{url}?filter=FILTER_OPTION_CHECKPOINT", headers=admin).json()
    assert [w["checkpoint"]["uuid"] for w in only["workloads"]] == ["ck"]
    both = client.get(f"{url}?filter=FILTER_OPTION_CHECKPOINT_OR_VALIDATION", headers=admin).json()
    assert [bool(w["validation"]) for w in both["workloads"]] == [True, False]
    val = client.get(f"{url}?filter=FILTER_OPTION_VALIDATION", headers=admin).json()
    assert len(val["workloads"]) == 1
    assert client.get("/api/v1/trials/999/workloads", headers=admin).status_code == 404


# --- progress, runner state, early exit -------------------------------------------------------


def test_progress_from_the_task(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, token, _ = add_trial(client, exp_id, allocation="RUNNING")
    task = task_headers(token)
    # the harness posts snake_case `is_raw` with no Content-Type
    resp = client.post(
        f"/api/v1/trials/{trial}/progress",
        content='{"progress": 0.25, "is_raw": true}',
        headers=task,
    )
    assert resp.status_code == 200, resp.text
    assert row(client, Trial, trial).progress == 0.25
    assert row(client, Experiment, exp_id).progress == 0.25  # single: one trial
    resp = client.post(
        f"/api/v1/trials/{trial}/progress", json={"progress": 2, "isRaw": True}, headers=task
    )
    assert resp.status_code == 200
    assert row(client, Experiment, exp_id).progress == 1.0
    listed = client.get("/api/v1/experiments", headers=admin).json()["experiments"][0]
    assert listed["progress"] == 1.0
    assert (
        client.post("/api/v1/trials/9/progress", json={"progress": 0.1}, headers=admin).status_code
        == 404
    )
    assert (
        client.post(f"/api/v1/trials/{trial}/progress", json={"progress": 0.1}).status_code == 401
    )


def test_runner_metadata(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, token, _ = add_trial(client, exp_id, allocation="RUNNING")
    url = f"/api/v1/trials/{trial}/runner/metadata"
    assert client.post(url, json={"state": "validating"}, headers=task_headers(token)).json() == {}
    body = client.get(f"/api/v1/trials/{trial}", headers=admin).json()["trial"]
    assert body["runnerState"] == "validating"


def test_early_exit_once(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, token, _ = add_trial(client, exp_id, allocation="RUNNING")
    url = f"/api/v1/trials/{trial}/early_exit"
    body = '{"reason": "EXITED_REASON_INVALID_HP"}'
    assert client.post(url, content=body, headers=task_headers(token)).status_code == 200
    assert row(client, Trial, trial).early_exit_reason == "INVALID_HP"
    again = client.post(url, content=body, headers=task_headers(token))
    assert again.status_code == 400  # the harness logs "already reported" on a 400
    assert "already been reported" in again.json()["message"]
    other, *_ = add_trial(client, exp_id)
    bad = client.post(
        f"/api/v1/trials/{other}/early_exit",
        json={"reason": "EXITED_REASON_UNSPECIFIED"},
        headers=admin,
    )
    assert bad.status_code == 400


# --- runs -----------------------------------------------------------------------------------


def test_runs_start_dedupes_storage(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, token, _ = add_trial(client, exp_id, allocation="RUNNING")
    task = task_headers(token)
    storage = {"type": "shared_fs", "host_path": "/tmp", "storage_path": "cp"}
    first = client.post(
        "/api/v1/runs/start", json={"runId": trial, "checkpointStorage": storage}, headers=task
    )
    assert first.status_code == 200, first.text
    storage_id = first.json()["storageId"]
    assert isinstance(storage_id, int)
    reordered = dict(reversed(list(storage.items())))
    again = client.post(
        "/api/v1/runs/start", json={"run_id": trial, "checkpoint_storage": reordered}, headers=task
    )
    assert again.json()["storageId"] == storage_id
    other = client.post(
        "/api/v1/runs/start",
        json={"runId": trial, "checkpointStorage": {**storage, "storage_path": "x"}},
        headers=task,
    )
    assert other.json()["storageId"] != storage_id
    with master(client).sessions() as session:
        assert session.scalar(select(func.count()).select_from(StorageBackend)) == 2
    none = client.post(
        "/api/v1/runs/start", json={"runId": trial, "checkpointStorage": None}, headers=task
    )
    assert none.status_code == 200
    assert none.json().get("storageId") is None
    assert client.post("/api/v1/runs/start", json={"runId": 999}, headers=admin).status_code == 404


def test_run_metadata(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, _, token, _ = add_trial(client, exp_id, allocation="RUNNING")
    task = task_headers(token)
    url = f"/api/v1/runs/{trial}/metadata"
    assert client.get(url, headers=task).json() == {"metadata": {}}
    first = client.post(
        url,
        json={"metadata": {"a": 1, "nested": {"x": 1}, "tags": ["t1"]}, "runId": trial},
        headers=task,
    )
    assert first.status_code == 200
    second = client.post(
        url, json={"metadata": {"nested": {"y": 2}, "tags": ["t2"], "a": 3}}, headers=task
    )
    expected = {"a": 3, "nested": {"x": 1, "y": 2}, "tags": ["t1", "t2"]}
    assert second.json() == {"metadata": expected}
    assert client.get(url, headers=admin).json() == {"metadata": expected}
    conflict = client.post(url, json={"metadata": {"nested": 5}}, headers=task)
    assert conflict.status_code == 400
    assert client.get("/api/v1/runs/999/metadata", headers=admin).status_code == 404
