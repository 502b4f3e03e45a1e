"""Metrics: ingest (run-id check, NaN strings, best validation, restarts, size limit) and reads."""

from __future__ import annotations

import json
import math
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.master.app import create_app
from stalwart.master.db.tables import Allocation, Experiment, MetricReport, Trial
from stalwart.master.services.experiments import settle_experiment, settle_trial
from stalwart.master.services.metrics import downsample_lttb, iter_report_rows
from stalwart.master.services.tasks import start_allocation
from stalwart.master.transitions import set_allocation_state
from tests.master.conftest import login, make_settings
from tests.master.test_experiments_api import add_trial, master, new_experiment, report, row


def task_headers(token: str | None) -> dict[str, str]:
    assert token is not None
    return {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}


def trial_body(client: TestClient, headers: dict[str, str], trial_id: int) -> dict[str, object]:
    body: dict[str, object] = client.get(f"/api/v1/trials/{trial_id}", headers=headers).json()[
        "trial"
    ]
    return body


def stream(client: TestClient, headers: dict[str, str], url: str) -> list[dict[str, object]]:
    resp = client.get(url, headers=headers)
    assert resp.status_code == 200, resp.text
    lines = [line for line in resp.text.split("\n") if line]
    reports: list[dict[str, object]] = []
    for line in lines:
        result = json.loads(line)["result"]
        reports += result["metrics"]
    return reports


# --- ingest -----------------------------------------------------------------------------------


def test_training_report_with_the_allocation_token(
    client: TestClient, admin: dict[str, str]
) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, token, _ = add_trial(client, exp_id, allocation="RUNNING")
    resp = report(
        client, task_headers(token), trial, run, "training", 100, {"loss": 0.5, "acc": "NaN"}
    )
    assert resp.status_code == 200, resp.text
    assert resp.json() == {}
    assert trial_body(client, admin, trial)["totalBatchesProcessed"] == 100
    # an older stepsCompleted never lowers totalBatchesProcessed
    assert (
        report(client, task_headers(token), trial, run, "training", 50, {"loss": 0.4}).status_code
        == 200
    )
    assert trial_body(client, admin, trial)["totalBatchesProcessed"] == 100
    with master(client).sessions() as session:
        stored = session.scalars(select(MetricReport).order_by(MetricReport.id)).first()
        assert stored is not None
        assert stored.metrics == {"loss": 0.5, "acc": "NaN"}
        assert stored.trial_run_id == run


def test_run_id_must_be_current(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, *_ = add_trial(client, exp_id, allocation="RUNNING")
    resp = report(client, admin, trial, run + 1, "training", 10, {"loss": 1})
    assert resp.status_code == 400
    assert "invalid run id" in resp.json()["message"]
    assert report(client, admin, 999, 1, "training", 10, {"loss": 1}).status_code == 404
    mismatch = client.post(
        f"/api/v1/trials/{trial}/metrics",
        json={
            "group": "training",
            "metrics": {"metrics": {"avgMetrics": {}}, "trialId": trial + 1, "trialRunId": run},
        },
        headers=admin,
    )
    assert mismatch.status_code == 400
    empty_group = report(client, admin, trial, run, "", 10, {"loss": 1})
    assert empty_group.status_code == 400
    with master(client).sessions() as session:
        assert session.scalars(select(MetricReport)).first() is None


def test_needs_credentials(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, *_ = add_trial(client, exp_id)
    assert report(client, {}, trial, run, "training", 1, {"loss": 1}).status_code == 401
    bad = {"Grpc-Metadata-x-allocation-token": "Bearer wrong"}
    assert report(client, bad, trial, run, "training", 1, {"loss": 1}).status_code == 401
    url = f"/api/v1/trials/metrics/trial_metrics?trialIds={trial}&group=training"
    assert client.get(url).status_code == 401


def test_validation_updates_latest_and_best(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, token, _ = add_trial(client, exp_id, allocation="RUNNING")
    task = task_headers(token)
    for steps, loss in ((10, 0.8), (20, 0.3), (30, "NaN"), (40, 0.5)):
        assert (
            report(client, task, trial, run, "validation", steps, {"loss": loss}).status_code == 200
        )
    body = trial_body(client, admin, trial)
    assert body["searcherMetricValue"] == 0.3
    latest = body["latestValidation"]
    best = body["bestValidation"]
    assert isinstance(latest, dict)
    assert isinstance(best, dict)
    assert latest["totalBatches"] == 40
    assert best["totalBatches"] == 20
    assert best["metrics"] == {"avgMetrics": {"loss": 0.3}, "batchMetrics": None}
    assert set(latest) >= {"metrics", "numInputs", "totalBatches"}


def test_bigger_is_better(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin, smaller=False)
    trial, run, *_ = add_trial(client, exp_id)
    for steps, acc in ((10, 0.5), (20, "Infinity"), (30, 0.7)):
        report(client, admin, trial, run, "validation", steps, {"loss": acc})
    body = trial_body(client, admin, trial)
    best = body["bestValidation"]
    assert isinstance(best, dict)
    assert best["totalBatches"] == 20
    assert body["searcherMetricValue"] == "Infinity"  # non-finite floats travel as strings
    exps = client.get("/api/v1/experiments?showTrialData=true", headers=admin).json()
    assert exps["experiments"][0]["bestTrialId"] == trial


def test_restart_archives_superseded_reports(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, *_ = add_trial(client, exp_id, allocation="RUNNING")
    for steps in (10, 20, 30):
        report(client, admin, trial, run, "training", steps, {"loss": 1.0 / steps})
    report(client, admin, trial, run, "validation", 30, {"loss": 0.01})
    with master(client).sessions() as session:
        t = session.get(Trial, trial)
        assert t is not None
        _, token = start_allocation(session, t.task_id, slots=1)  # run 2 resumes from step 20
        session.commit()
        new_run = t.run_id
    assert new_run == run + 1
    old = report(client, admin, trial, run, "training", 40, {"loss": 0.0})
    assert old.status_code == 400  # the old run may not report any more
    assert (
        report(
            client, task_headers(token), trial, new_run, "training", 30, {"loss": 0.5}
        ).status_code
        == 200
    )
    workloads = client.get(f"/api/v1/trials/{trial}/workloads", headers=admin).json()["workloads"]
    kinds = [
        (k, w[k]["totalBatches"]) for w in workloads for k in ("training", "validation") if w[k]
    ]
    assert kinds == [("training", 10), ("training", 20), ("training", 30)]
    assert workloads[-1]["training"]["metrics"]["avgMetrics"] == {"loss": 0.5}
    body = trial_body(client, admin, trial)
    assert body["searcherMetricValue"] is None  # its only validation was superseded
    assert body["latestValidation"] is None
    archived = stream(
        client, admin, f"/api/v1/trials/metrics/trial_metrics?trialIds={trial}&group=training"
    )
    assert [r["totalBatches"] for r in archived] == [10, 20, 30]


def test_report_size_limit(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", limits={"max_metrics_report_bytes": 400})
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        exp_id = new_experiment(client, admin)
        trial, run, *_ = add_trial(client, exp_id)
        assert report(client, admin, trial, run, "training", 1, {"loss": 1}).status_code == 200
        big = report(client, admin, trial, run, "training", 2, {f"m{i}": i for i in range(100)})
        assert big.status_code == 413
        message = big.json()["message"]
        assert "max_metrics_report_bytes" in message
        assert "400" in message


# --- reads ------------------------------------------------------------------------------------


def test_trial_metrics_stream(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    t1, r1, *_ = add_trial(client, exp_id)
    t2, r2, *_ = add_trial(client, exp_id)
    for steps in (10, 20):
        report(client, admin, t1, r1, "training", steps, {"loss": steps})
        report(client, admin, t2, r2, "training", steps, {"loss": -steps})
    report(client, admin, t1, r1, "validation", 20, {"loss": 0.2})
    report(client, admin, t1, r1, "inference", 5, {"latency": 3})
    url = f"/api/v1/trials/metrics/trial_metrics?trialIds={t1}&trialIds={t2}&group=training"
    reports = stream(client, admin, url)
    assert [(r["trialId"], r["totalBatches"]) for r in reports] == [
        (t1, 10),
        (t1, 20),
        (t2, 10),
        (t2, 20),
    ]
    for key in (
        "archived",
        "endTime",
        "group",
        "id",
        "metrics",
        "totalBatches",
        "trialId",
        "trialRunId",
    ):
        assert key in reports[0], key
    assert reports[0]["metrics"] == {"avg_metrics": {"loss": 10}, "batch_metrics": None}
    validation = stream(
        client, admin, f"/api/v1/trials/metrics/trial_metrics?trialIds={t1}&group=validation"
    )
    assert validation[0]["metrics"] == {"validation_metrics": {"loss": 0.2}}
    custom = stream(
        client, admin, f"/api/v1/trials/metrics/trial_metrics?trialIds={t1}&group=inference"
    )
    assert custom[0]["metrics"] == {"avg_metrics": {"latency": 3}, "batch_metrics": None}
    legacy = stream(client, admin, f"/api/v1/trials/metrics/training_metrics?trialIds={t2}")
    assert [r["totalBatches"] for r in legacy] == [10, 20]
    legacy_val = stream(client, admin, f"/api/v1/trials/metrics/validation_metrics?trialIds={t1}")
    assert len(legacy_val) == 1
    empty = client.get(
        f"/api/v1/trials/metrics/trial_metrics?trialIds={t2}&group=none", headers=admin
    )
    assert empty.status_code == 200
    assert empty.text == ""
    missing = client.get("/api/v1/trials/metrics/trial_metrics?trialIds=999&group=x", headers=admin)
    assert missing.status_code == 404


def test_stream_batches_follow_the_series(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, *_ = add_trial(client, exp_id)
    for steps in (5, 5, 6, 7, 8):
        report(client, admin, trial, run, "training", steps, {"loss": steps})
    batches = list(iter_report_rows(master(client).sessions, [trial], "training", batch=2))
    assert [len(b) for b in batches] == [2, 2, 1]
    assert [row[3] for b in batches for row in b] == [5, 5, 6, 7, 8]  # steps_completed


def test_metric_series_downsamples(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, *_ = add_trial(client, exp_id)
    for step in range(1, 101):
        value: object = 100.0 if step == 50 else float(step % 7)
        if step == 60:
            value = "NaN"
        report(client, admin, trial, run, "training", step, {"loss": value})
    url = f"/api/v1/trials/{trial}/metrics/series?metric=loss&maxPoints=10"
    body = client.get(url, headers=admin).json()
    assert body["total"] == 99  # the NaN point is left out
    points = body["points"]
    assert len(points) == 10
    assert points[0]["batches"] == 1
    assert points[-1]["batches"] == 100
    assert any(p["value"] == 100.0 for p in points)  # the peak survives
    window = client.get(
        f"/api/v1/trials/{trial}/metrics/series?metric=loss&startBatches=10&endBatches=12",
        headers=admin,
    ).json()
    assert [p["batches"] for p in window["points"]] == [10, 11, 12]
    assert (
        client.get("/api/v1/trials/999/metrics/series?metric=loss", headers=admin).status_code
        == 404
    )
    assert client.get(f"{url[:-2]}2", headers=admin).status_code == 400


def test_lttb_keeps_ends_and_extremes() -> None:
    points = [(float(x), math.sin(x / 5.0)) for x in range(200)]
    points[120] = (120.0, 9.0)
    keep = downsample_lttb(points, 20)
    assert len(keep) == 20
    assert keep[0] == 0
    assert keep[-1] == 199
    assert 120 in keep
    assert keep == sorted(keep)
    assert downsample_lttb(points[:5], 20) == [0, 1, 2, 3, 4]


def test_other_users_can_read(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    trial, run, *_ = add_trial(client, exp_id)
    report(client, admin, trial, run, "training", 1, {"loss": 1})
    user = login(client, "determined")
    assert trial_body(client, user, trial)["totalBatchesProcessed"] == 1
    assert row(client, Trial, trial).total_batches == 1


def batch_item(trial: int, run: int, group: str, steps: int, metrics: dict[str, object]) -> object:
    return {
        "group": group,
        "metrics": {
            "metrics": {"avgMetrics": metrics, "batchMetrics": None},
            "trialId": trial,
            "trialRunId": run,
            "stepsCompleted": steps,
            "reportTime": "2025-01-01T00:00:00Z",
        },
    }


def test_batch_ingest(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    t1, r1, token, _ = add_trial(client, exp_id, allocation="RUNNING")
    t2, r2, *_ = add_trial(client, exp_id)
    reports = [batch_item(t1, r1, "training", s, {"loss": 1 / s}) for s in range(1, 51)]
    reports += [
        batch_item(t2, r2, "validation", 10, {"loss": 0.4}),
        batch_item(t2, r2, "validation", 20, {"loss": 0.2}),
        batch_item(t2, r2, "validation", 30, {"loss": 0.3}),
    ]
    # A user who may change both trials can batch them together; a task's token only its own.
    alien = client.post(
        "/api/v1/trials/metrics/batch",
        content=json.dumps({"reports": reports}),
        headers=task_headers(token),
    )
    assert alien.status_code == 403, alien.text
    resp = client.post(
        "/api/v1/trials/metrics/batch", content=json.dumps({"reports": reports}), headers=admin
    )
    assert resp.status_code == 200, resp.text
    assert trial_body(client, admin, t1)["totalBatchesProcessed"] == 50
    second = trial_body(client, admin, t2)
    assert second["searcherMetricValue"] == 0.2
    best = second["bestValidation"]
    assert isinstance(best, dict)
    assert best["totalBatches"] == 20
    assert best["endTime"] == "2025-01-01T00:00:00Z"
    series = stream(
        client, admin, f"/api/v1/trials/metrics/trial_metrics?trialIds={t1}&group=training"
    )
    assert len(series) == 50


def test_batch_is_all_or_nothing(client: TestClient, admin: dict[str, str]) -> None:
    exp_id = new_experiment(client, admin)
    t1, r1, *_ = add_trial(client, exp_id)
    t2, r2, *_ = add_trial(client, exp_id)
    reports = [
        batch_item(t1, r1, "training", 1, {"loss": 1}),
        batch_item(t2, r2 + 5, "training", 1, {"loss": 1}),
    ]
    resp = client.post("/api/v1/trials/metrics/batch", json={"reports": reports}, headers=admin)
    assert resp.status_code == 400
    assert "invalid run id" in resp.json()["message"]
    with master(client).sessions() as session:
        assert session.scalars(select(MetricReport)).first() is None
    assert row(client, Trial, t1).total_batches == 0
    assert client.post("/api/v1/trials/metrics/batch", json={"reports": []}).status_code == 401
    bad = client.post("/api/v1/trials/metrics/batch", json={"nope": 1}, headers=admin)
    assert bad.status_code == 400
    assert "reports" in bad.json()["message"]


def test_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    """The dialect-sensitive SQL of experiments, trials and metrics, on PostgreSQL."""
    settings = make_settings(tmp_path / "home", db=pg_url)
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        exp_id = new_experiment(client, admin, labels="[pg]")
        trial, run, token, _ = add_trial(client, exp_id, allocation="RUNNING")
        task = task_headers(token)
        for steps in (10, 20):
            assert (
                report(client, task, trial, run, "training", steps, {"loss": "NaN"}).status_code
                == 200
            )
        assert report(client, task, trial, run, "validation", 20, {"loss": 0.5}).status_code == 200
        batch = [batch_item(trial, run, "validation", 30, {"loss": 0.25})]
        resp = client.post("/api/v1/trials/metrics/batch", json={"reports": batch}, headers=task)
        assert resp.status_code == 200
        with master(client).sessions() as session:
            t = session.get(Trial, trial)
            assert t is not None
            _, token2 = start_allocation(session, t.task_id, slots=1)
            session.commit()
        assert (
            report(
                client, task_headers(token2), trial, run + 1, "training", 20, {"loss": 1}
            ).status_code
            == 200
        )
        # run 2 resumed before step 20: both validations (20, 30) were superseded
        assert trial_body(client, admin, trial)["searcherMetricValue"] is None
        listed = client.get(
            "/api/v1/experiments?archived=false&users=admin&labels=pg&sortBy=SORT_BY_USER",
            headers=admin,
        ).json()
        assert [e["id"] for e in listed["experiments"]] == [exp_id]
        assert listed["pagination"]["total"] == 1
        for sort in (
            "SORT_BY_DURATION",
            "SORT_BY_CHECKPOINT_SIZE",
            "SORT_BY_BEST_VALIDATION_METRIC",
        ):
            url = f"/api/v1/experiments/{exp_id}/trials?sortBy={sort}&orderBy=ORDER_BY_DESC"
            assert client.get(url, headers=admin).status_code == 200, sort
        workloads = client.get(f"/api/v1/trials/{trial}/workloads", headers=admin).json()
        kinds = [(k, w[k]["totalBatches"]) for w in workloads["workloads"] for k in w if w[k]]
        assert kinds == [("training", 10), ("training", 20)]
        series = client.get(f"/api/v1/trials/{trial}/metrics/series?metric=loss", headers=admin)
        assert series.json()["total"] == 1  # the NaN at 10 is left out
        reports = stream(
            client, admin, f"/api/v1/trials/metrics/trial_metrics?trialIds={trial}&group=training"
        )
        assert [r["totalBatches"] for r in reports] == [10, 20]
        client.post(f"/api/v1/experiments/{exp_id}/kill", headers=admin)
        with master(client).sessions() as session:
            for alloc in session.scalars(select(Allocation)):
                set_allocation_state(session, alloc, "TERMINATED")
            exp = session.get(Experiment, exp_id)
            assert exp is not None
            for t in session.scalars(select(Trial)):
                settle_trial(session, t)
            settle_experiment(session, exp)
            session.commit()
        assert client.delete(f"/api/v1/experiments/{exp_id}", headers=admin).status_code == 200


ASHA = """\
name: asha
entrypoint: python3 train.py
hyperparameters:
  lr: {type: double, minval: 0.0, maxval: 1.0}
searcher:
  name: async_halving
  metric: loss
  time_metric: batches
  max_time: 100
  num_rungs: 3
  max_trials: 4
"""


def test_a_validation_wakes_the_cluster_loop_only_for_searchers_that_act_on_it(
    client: TestClient, admin: dict[str, str]
) -> None:
    """ASHA may stop a trial on its validation, so the report hints the cluster loop at once; a
    single (random, grid) search only counts it, so no round is spent on it: its searcher is
    fed the report at its next drive, with the trial's exit."""
    hints = master(client).hints
    single = new_experiment(client, admin)
    resp = client.post(
        "/api/v1/experiments",
        json={"activate": True, "config": ASHA, "modelDefinition": [], "projectId": None},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    asha = int(resp.json()["experiment"]["id"])
    hints.take_experiments()  # the creations' own hints
    for exp_id in (single, asha):
        trial, run, token, _ = add_trial(client, exp_id, allocation="RUNNING")
        resp = report(
            client, task_headers(token), trial, run, "validation", 10, {"loss": 0.5, "batches": 10}
        )
        assert resp.status_code == 200, resp.text
    assert hints.take_experiments() == {asha}
