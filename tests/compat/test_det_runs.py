"""Determined 0.38's flat runs, the trial comparison series, the experiment metric streams and
the project table's columns with the official 0.38.1 client library, on Stalwart.

The web UI's run table, charts and experiment table call the generated ``bindings``:
``post_SearchRuns``, ``post_{Kill,Pause,Resume,Archive,Move}Runs``, ``get_CompareTrials``
(``GET /api/v1/trials/time-series``, which ``/trials/{trial_id}`` once swallowed),
``get_ExpMetricNames``, ``get_MetricBatches``, ``get_TrialsSnapshot``, ``get_TrialsSample``
(newline-delimited streams), ``get_GetProjectColumns``, ``get_GetProjectNumericMetricsRange``,
``post_SearchExperiments``, ``get_GetExperimentLabels``, ``get_GetExperimentValidationHistory``,
``get_GetModelDefTree``, ``post_GetModelDefFile``, ``get_CurrentUser`` and ``get_health``;
``workflows/bindings_calls.py`` runs them over the client's own session, so each test proves
the client parses the answer. One master, no agent: a single-trial experiment and a two-trial
grid, both active (their trials stay queued); metrics are reported through the official
``post_ReportTrialMetrics``, as a trial would.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Det, MasterProcess, logged_in_admin
from tests.compat.test_det_bulk_actions import calls, get_experiment
from tests.compat.test_det_workflows import WORKFLOWS, _config, _created_id, _wait_state

pytestmark = pytest.mark.compat

PROJECT = 1
READER_PASSWORD = "Long-password-1"


@pytest.fixture(scope="module")
def admin(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Det:
    return logged_in_admin(det_venv, stalwart_master, tmp_path_factory)


def _trial_ids(cli: Det, wanted: dict[int, int]) -> dict[int, list[int]]:
    """``{experiment: its trial ids}`` once each experiment has the number of trials wanted
    (its searcher creates them right after it is created)."""
    found: dict[int, list[int]] = {}
    for _ in range(60):
        answers = calls(
            cli,
            *({"fn": "get_GetExperimentTrials", "kwargs": {"experimentId": e}} for e in wanted),
        )
        found = {
            e: sorted(t["id"] for t in got["ok"]["trials"])
            for e, got in zip(wanted, answers, strict=True)
        }
        if all(len(found[e]) == n for e, n in wanted.items()):
            return found
    raise AssertionError(f"trials {found}, wanted {wanted} of each experiment")


@pytest.fixture(scope="module")
def runs(admin: Det, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``single``: the trial of a single-trial experiment (``single_exp``); ``grid``: the two
    trials of a grid experiment."""
    model = tmp_path_factory.mktemp("runs-model")
    (model / "trial.py").write_text((WORKFLOWS / "trial.py").read_text(), encoding="utf-8")
    single_exp = _created_id(
        admin.ok("experiment", "create", _config(model.parent, "runs-single", 1, 0.0), str(model))
    )
    grid = model.parent / "runs-grid.yaml"
    grid.write_text(
        "name: runs-grid\nentrypoint: python3 trial.py\n"
        "hyperparameters:\n  steps: {type: categorical, vals: [1, 2]}\n  sleep: 0\n"
        "labels: [grid, shared]\n"
        "searcher:\n  name: grid\n  metric: loss\n  max_length: 1\n  max_concurrent_trials: 2\n"
        "max_restarts: 0\n",
        encoding="utf-8",
    )
    grid_exp = _created_id(admin.ok("experiment", "create", str(grid), str(model)))
    trials = _trial_ids(admin, {single_exp: 1, grid_exp: 2})
    return {
        "single_exp": single_exp,
        "single": trials[single_exp][0],
        "grid_exp": grid_exp,
        "grid": trials[grid_exp],
    }


def _report(trial_id: int, group: str, steps: int, metrics: dict[str, Any]) -> dict[str, Any]:
    return {
        "fn": "post_ReportTrialMetrics",
        "kwargs": {"metrics_trialId": trial_id},
        "body": {
            "type": "v1ReportTrialMetricsRequest",
            "json": {
                "group": group,
                "metrics": {
                    "trialId": trial_id,
                    "trialRunId": 1,
                    "stepsCompleted": steps,
                    "metrics": {"avgMetrics": metrics},
                },
            },
        },
    }


def _runs_call(action: str, ids: list[int], **extra: Any) -> dict[str, Any]:
    return {
        "fn": f"post_{action}Runs",
        "body": {
            "type": f"v1{action}RunsRequest",
            "json": {"runIds": ids, "projectId": PROJECT, **extra},
        },
    }


def _search(**body: Any) -> dict[str, Any]:
    return {"fn": "post_SearchRuns", "body": {"type": "v1SearchRunsRequest", "json": body}}


def _outcome(result: dict[str, Any]) -> dict[int, str]:
    assert "ok" in result, result
    return {r["id"]: r["error"] for r in result["ok"]["results"]}


@pytest.fixture(scope="module")
def reported(admin: Det, runs: dict[str, Any]) -> dict[str, Any]:
    """Metrics of the single trial, reported through ``post_ReportTrialMetrics``: training
    ``loss`` (and ``epochs``) at batches 1-5, validation ``loss`` 0.25 (the searcher metric)
    and ``acc`` 0.9 at batch 5."""
    single = runs["single"]
    reports = [_report(single, "training", s, {"loss": s / 10, "epochs": s}) for s in range(1, 6)]
    reports.append(_report(single, "validation", 5, {"loss": 0.25, "acc": 0.9}))
    stored = calls(admin, *reports)
    assert all("ok" in r for r in stored), stored
    return runs


def test_compare_trials_time_series(admin: Det, reported: dict[str, Any]) -> None:
    single, other = reported["single"], reported["grid"][0]
    by_names, by_ids, filtered = calls(
        admin,
        {
            "fn": "get_CompareTrials",
            "kwargs": {
                "trialIds": [other, single],
                "metricNames": ["loss"],
                "metricType": "METRIC_TYPE_TRAINING",
                "maxDatapoints": 3,
            },
            "enums": {"metricType": "v1MetricType"},
        },
        {
            "fn": "get_CompareTrials",
            "kwargs": {"trialIds": [single], "metricIds": ["training.loss", "validation.acc"]},
        },
        {
            "fn": "get_CompareTrials",
            "kwargs": {"trialIds": [single], "timeSeriesFilter_name": "loss"},
        },
    )
    trials = by_names["ok"]["trials"]
    assert [t["trial"]["id"] for t in trials] == sorted([single, other])
    mine = next(t for t in trials if t["trial"]["id"] == single)
    (training,) = mine["metrics"]
    assert training["group"] == "training"
    assert training["type"] == "METRIC_TYPE_TRAINING"
    assert [p["batches"] for p in training["data"]] == [1, 3, 5]  # 3 of 5, ends kept
    assert [p["values"] for p in training["data"]] == [{"loss": 0.1}, {"loss": 0.3}, {"loss": 0.5}]
    assert [p["epoch"] for p in training["data"]] == [1.0, 3.0, 5.0]
    assert all(p["time"] for p in training["data"])
    assert next(t for t in trials if t["trial"]["id"] == other)["metrics"] == []
    (both,) = by_ids["ok"]["trials"]
    assert [(m["group"], len(m["data"])) for m in both["metrics"]] == [
        ("training", 5),
        ("validation", 1),
    ]
    assert both["metrics"][1]["data"][0]["values"] == {"acc": 0.9}
    assert filtered["status"] == 400
    assert "timeSeriesFilter" in filtered["error"]


def test_metric_streams_and_project_columns(admin: Det, reported: dict[str, Any]) -> None:
    exp, single = reported["single_exp"], reported["single"]
    training = {"metricName": "loss", "group": "training", "periodSeconds": 1}
    names, batches, snapshot, sample, cols, ranges = calls(
        admin,
        # the experiment is active: each stream would go on; its first answer is read
        {"fn": "get_ExpMetricNames", "kwargs": {"ids": [exp]}, "take": 1},
        {"fn": "get_MetricBatches", "kwargs": {"experimentId": exp, **training}, "take": 1},
        {
            "fn": "get_TrialsSnapshot",
            "kwargs": {
                "experimentId": exp,
                "batchesProcessed": 3,
                "batchesMargin": 1,
                **training,
            },
            "take": 1,
        },
        {
            "fn": "get_TrialsSample",
            "kwargs": {"experimentId": exp, "maxDatapoints": 3, **training},
            "take": 1,
        },
        {"fn": "get_GetProjectColumns", "kwargs": {"id": PROJECT}},
        {"fn": "get_GetProjectNumericMetricsRange", "kwargs": {"id": PROJECT}},
    )
    (first,) = names["ok"]
    assert first["searcherMetrics"] == ["loss"]
    assert sorted(first["trainingMetrics"]) == ["epochs", "loss"]
    assert sorted(first["validationMetrics"]) == ["acc", "loss"]
    assert {"group": "validation", "name": "acc"} in first["metricNames"]
    assert batches["ok"] == [{"batches": [1, 2, 3, 4, 5]}]
    (snap,) = snapshot["ok"]
    # within 3 ± 1 batches, the latest report: batch 4
    assert snap["trials"] == [
        {
            "trialId": single,
            "hparams": {"steps": 1, "sleep": 0.0},
            "metric": 0.4,
            "batchesProcessed": 4,
        }
    ]
    (picked,) = sample["ok"]
    assert picked["promotedTrials"] == [single]
    (curve,) = picked["trials"]
    assert [p["batches"] for p in curve["data"]] == [1, 3, 5]
    columns = {c["column"]: c for c in cols["ok"]["columns"]}
    assert columns["id"]["type"] == "COLUMN_TYPE_NUMBER"
    assert columns["validation.loss.min"]["location"] == "LOCATION_TYPE_VALIDATIONS"
    assert columns["training.loss.mean"]["type"] == "COLUMN_TYPE_NUMBER"
    assert columns["hp.steps"]["location"] == "LOCATION_TYPE_HYPERPARAMETERS"
    found = {r["metricsName"]: (r["min"], r["max"]) for r in ranges["ok"]["ranges"]}
    assert found["searcherMetricsVal"] == (0.25, 0.25)
    assert found["training.loss.last"] == (0.5, 0.5)
    assert found["training.loss.max"] == (0.5, 0.5)
    assert found["validation.acc.min"] == (0.9, 0.9)


def test_experiment_details_search_and_health(admin: Det, reported: dict[str, Any]) -> None:
    exp, single, grid = reported["single_exp"], reported["single"], reported["grid_exp"]
    admin.ok("experiment", "label", "add", str(exp), "shared")
    tree, health, me, labels, history, searched, refused, file = calls(
        admin,
        {"fn": "get_GetModelDefTree", "kwargs": {"experimentId": exp}},
        {"fn": "get_health"},
        {"fn": "get_CurrentUser"},
        {"fn": "get_GetExperimentLabels", "kwargs": {"projectId": PROJECT}},
        {"fn": "get_GetExperimentValidationHistory", "kwargs": {"experimentId": exp}},
        {
            "fn": "post_SearchExperiments",
            "body": {
                "type": "v1SearchExperimentsRequest",
                "json": {"projectId": PROJECT, "sort": "id=desc"},
            },
        },
        {
            "fn": "post_SearchExperiments",
            "body": {"type": "v1SearchExperimentsRequest", "json": {"sort": "colour=asc"}},
        },
        {
            "fn": "post_GetModelDefFile",
            "kwargs": {"experimentId": exp},
            "body": {
                "type": "v1GetModelDefFileRequest",
                "json": {"experimentId": exp, "path": "trial.py"},
            },
        },
    )
    (node,) = tree["ok"]["files"]
    assert (node["path"], node["name"], node["isDir"]) == ("trial.py", "trial.py", False)
    source = (WORKFLOWS / "trial.py").read_bytes()
    assert node["contentLength"] == len(source)
    assert base64.b64decode(file["ok"]["file"]) == source
    assert health["ok"]["status"] == "up"
    assert health["ok"]["database"] == "up"
    assert me["ok"]["user"]["username"] == "admin"
    assert labels["ok"]["labels"] == ["shared", "grid"]  # most used first
    (best,) = history["ok"]["validationHistory"]
    assert (best["trialId"], best["searcherMetric"]) == (single, 0.25)
    found = searched["ok"]["experiments"]
    assert [e["experiment"]["id"] for e in found] == [grid, exp]
    assert found[1]["bestTrial"]["id"] == single
    assert searched["ok"]["pagination"]["total"] == 2
    assert refused["status"] == 400
    assert "colour" in refused["error"]

    # a member who does not own the experiment reads its files but cannot kill its run
    admin.ok("user", "create", "runs-reader", "--password", READER_PASSWORD)
    read, kill = calls(
        admin,
        {
            "fn": "post_GetModelDefFile",
            "kwargs": {"experimentId": exp},
            "body": {
                "type": "v1GetModelDefFileRequest",
                "json": {"experimentId": exp, "path": "trial.py"},
            },
        },
        _runs_call("Kill", [single]),
        user="runs-reader",
        password=READER_PASSWORD,
    )
    assert base64.b64decode(read["ok"]["file"]) == source
    assert _outcome(kill) == {
        single: f"Run with id '{single}' not found in project with id '{PROJECT}'"
    }


def test_search_runs(admin: Det, runs: dict[str, Any]) -> None:
    everything, page, refused = calls(
        admin,
        _search(projectId=PROJECT),
        _search(projectId=PROJECT, sort="id=desc", limit=2),
        _search(filter='{"filterGroup":{"children":[{"kind":"field"}]}}'),
    )
    found = {r["id"]: r for r in everything["ok"]["runs"]}
    assert set(found) == {runs["single"], *runs["grid"]}
    assert everything["ok"]["pagination"]["total"] == 3
    single = found[runs["single"]]
    assert single["experiment"]["id"] == runs["single_exp"]
    assert single["experiment"]["isMultitrial"] is False
    assert found[runs["grid"][0]]["experiment"]["isMultitrial"] is True
    assert single["projectId"] == PROJECT
    assert single["workspaceName"] == "Uncategorized"
    assert single["state"] in ("STATE_ACTIVE", "STATE_QUEUED")
    assert [r["id"] for r in page["ok"]["runs"]] == sorted(found, reverse=True)[:2]
    assert refused["status"] == 400
    assert "filter" in refused["error"]


def test_run_actions(admin: Det, runs: dict[str, Any]) -> None:
    single, (grid_a, grid_b) = runs["single"], runs["grid"]
    paused, resumed, killed = calls(
        admin,
        _runs_call("Pause", [single, grid_a, 99999]),
        _runs_call("Resume", [single]),
        _runs_call("Kill", [grid_a]),
    )
    assert _outcome(paused) == {
        single: "",
        grid_a: f"Cannot pause/unpause run '{grid_a}' (part of multi-trial).",
        99999: f"Run with id '99999' not found in project with id '{PROJECT}'",
    }
    assert _outcome(resumed) == {single: ""}
    assert _outcome(killed) == {grid_a: ""}
    for _ in range(100):
        (trial,) = calls(admin, {"fn": "get_GetTrial", "kwargs": {"trialId": grid_a}})
        if trial["ok"]["trial"]["state"] == "STATE_CANCELED":
            break
    else:
        raise AssertionError(f"run {grid_a} is {trial}, not canceled")

    admin.ok("workspace", "create", "runs-ws")
    made = admin.ok("project", "create", "runs-ws", "runs-elsewhere", "--json").stdout
    destination = json.loads(made)["id"]
    archived, deleted, unfinished, moved, state_after = calls(
        admin,
        _runs_call("Archive", [grid_a]),
        _runs_call("Delete", [grid_a]),
        _runs_call("Archive", [single]),
        {
            "fn": "post_MoveRuns",
            "body": {
                "type": "v1MoveRunsRequest",
                "json": {
                    "runIds": [single, grid_b],
                    "sourceProjectId": PROJECT,
                    "destinationProjectId": destination,
                },
            },
        },
        get_experiment(runs["single_exp"]),
    )
    assert "archive its experiment" in _outcome(archived)[grid_a]
    assert "delete its experiment" in _outcome(deleted)[grid_a]
    assert _outcome(unfinished) == {single: "Run is not in a terminal state."}
    move = _outcome(moved)
    assert move[single] == ""
    assert "move the experiment" in move[grid_b]
    assert state_after["ok"]["experiment"]["projectId"] == destination


def test_metric_stream_ends_with_its_experiment(admin: Det, reported: dict[str, Any]) -> None:
    exp = reported["single_exp"]
    admin.ok("experiment", "kill", str(exp))
    _wait_state(admin, exp, "STATE_CANCELED")
    (batches,) = calls(
        admin,
        {
            "fn": "get_MetricBatches",
            "kwargs": {"experimentId": exp, "metricName": "loss", "group": "training"},
        },
    )
    assert batches["ok"] == [{"batches": [1, 2, 3, 4, 5]}]  # one answer, then the end
