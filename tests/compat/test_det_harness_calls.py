"""The official 0.38.1 harness's and client's remaining calls against a real master and agent,
and the trial fields they read back (issue 23):

- ``POST /api/v1/allocations/{id}/resources/{rid}/daemon`` from a task, as the DeepSpeed
  launcher makes it (Stalwart's allocations are one container each: accepted, changes nothing;
  an id that is not the allocation's is 404);
- ``searcher.source_checkpoint_uuid`` / ``source_trial_id``: the trial starts from that checkpoint
  (``DET_LATEST_CHECKPOINT`` with no steps completed) and shows it as
  ``warmStartCheckpointUuid``; ``POST /api/v1/trial-source-info`` from
  ``report_task_using_checkpoint``;
- ``summaryMetrics`` of ``GET /api/v1/trials/{id}`` as the SDK's ``Trial.summary_metrics``;
- ``POST /task-logs`` from the harness's legacy log sender, and ``PATCH /api/v1/trials/{id}``
  from an unmanaged trial's heartbeat (refused: Stalwart's trials are all managed);
- ``GET /info`` as ``det version`` and ``det auth list-providers`` read it, and the agents'
  ``version``.

The agent maps the experiments' image to the det venv and runs each task in its own mount
namespace, as ``test_det_harness.py`` explains.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from stalwart.agent.isolation import probe
from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess, describe, det_at, sdk_result
from tests.integration.api import Api

pytestmark = pytest.mark.compat

HARNESS = Path(__file__).parent / "harness"
IMAGE = "stalwart-compat/det-venv"
WAIT_S = 120.0
WIRE_VERSION = "0.38.1"


@pytest.fixture(scope="module")
def agent(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """A one-slot agent of the module's master that runs the det venv's Python."""
    found = probe(tmp_path_factory.mktemp("probe") / "probe")
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"no mount namespaces for tasks: {found} (required under CI=true)")
        pytest.skip(f"no mount namespaces for tasks here: {found}")
    port = urlparse(stalwart_master.url).port
    assert port is not None
    cluster = LocalCluster(home=stalwart_master.home, port=port)
    cluster.start_agent(
        "calls", slots=1, extra=["--python", f"{IMAGE}={det_venv}", "--mount-namespaces", "require"]
    )
    try:
        yield cluster
    finally:
        cluster.stop_agent("calls")


@pytest.fixture(scope="module")
def api(stalwart_master: MasterProcess) -> Iterator[Api]:
    client = Api(stalwart_master.url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def admin(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Det:
    cli = det_at(det_venv, stalwart_master, tmp_path_factory.mktemp("admin"))
    cli.login("admin", "")
    return cli


def _create(api: Api, steps: int, searcher_extra: str = "", *, activate: bool = True) -> int:
    config = (
        "name: harness-calls\nentrypoint: python3 calls_trial.py\n"
        f"environment:\n  image: {IMAGE}\nhyperparameters:\n  steps: {steps}\n"
        "max_restarts: 0\nsearcher:\n  name: single\n  metric: loss\n"
        "  max_length:\n    batches: 10\n" + searcher_extra
    )
    files = {"calls_trial.py": (HARNESS / "calls_trial.py").read_text()}
    return api.create_experiment(config, files, activate=activate)


def _completed(api: Api, exp_id: int) -> dict[str, Any]:
    exp = api.wait_state(exp_id, timeout=WAIT_S)
    (trial,) = api.trials(exp_id)
    if exp["state"] != "STATE_COMPLETED":
        raise AssertionError(f"experiment {exp_id} ended {exp['state']}:\n{api.logs(trial['id'])}")
    return trial


@pytest.fixture(scope="module")
def source(agent: LocalCluster, api: Api) -> dict[str, Any]:
    """A completed trial (3 steps) with one checkpoint; ``uuid`` is that checkpoint's."""
    exp_id = _create(api, 3)
    trial = _completed(api, exp_id)
    (ckpt,) = [c for c in api.checkpoints(exp_id) if c["state"] == "STATE_COMPLETED"]
    return {"experiment": exp_id, "trial": trial, "uuid": ckpt["uuid"]}


def test_a_task_marks_its_resources_daemon_and_runs_on(api: Api, source: dict[str, Any]) -> None:
    # the trial went on training after the mark and completed: the mark did not end it
    logs = api.logs(source["trial"]["id"])
    assert "DAEMON own=ok other=404" in logs, logs[-3000:]
    assert source["trial"]["state"] == "STATE_COMPLETED"
    assert [int(m["totalBatches"]) for m in api.metrics(source["trial"]["id"])] == [1, 2, 3]


def test_summary_metrics_as_the_sdk_reads_them(
    det_venv: Path, admin: Det, source: dict[str, Any]
) -> None:
    result = sdk_result(
        det_venv,
        admin,
        HARNESS / "calls_client.py",
        str(source["trial"]["id"]),
        marker="CALLS_RESULT",
    )
    summary = result["summary_metrics"]
    assert set(summary) == {"avg_metrics", "validation_metrics"}
    loss = summary["avg_metrics"]["loss"]
    assert loss["type"] == "number"
    assert loss["count"] == 3
    assert loss["min"] == pytest.approx(1 / 3)
    assert loss["max"] == pytest.approx(1.0)
    assert loss["sum"] == pytest.approx(1 + 1 / 2 + 1 / 3)
    assert loss["mean"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert loss["last"] == pytest.approx(1 / 3)
    assert summary["avg_metrics"]["done"] == {"type": "boolean", "last": True}
    assert summary["avg_metrics"]["phase"] == {"type": "string", "last": "step-3"}
    assert summary["validation_metrics"]["loss"]["last"] == 0.5
    assert summary["validation_metrics"]["loss"]["count"] == 1
    assert result["warm_start"] is None  # this trial started from scratch
    assert result["agent_versions"] == [WIRE_VERSION]

    # PATCH /api/v1/trials/{id}: only unmanaged trials, as on Determined
    assert result["patch"]["status"] == 400
    assert "only unmanaged trials" in result["patch"]["message"]

    # POST /task-logs: the legacy sender's lines are the trial's, split at newlines
    assert result["shipped"] is True
    logs = Api(admin.master.url)
    try:
        text = logs.logs(source["trial"]["id"])
    finally:
        logs.close()
    assert "LEGACY line one\nLEGACY line two\n" in text


def test_a_warm_start_from_a_checkpoint(
    api: Api, source: dict[str, Any], det_venv: Path, admin: Det
) -> None:
    exp_id = _create(api, 2, f"  source_checkpoint_uuid: {source['uuid']}\n")
    trial = _completed(api, exp_id)
    logs = api.logs(trial["id"])
    # the first run restores the source checkpoint, with no steps completed
    assert f"WARM uuid={source['uuid']} step=3 steps_completed=0" in logs, logs[-3000:]
    assert trial["warmStartCheckpointUuid"] == source["uuid"]
    described = api.get(f"/api/v1/trials/{trial['id']}")["trial"]
    assert described["warmStartCheckpointUuid"] == source["uuid"]
    assert [int(m["totalBatches"]) for m in api.metrics(trial["id"])] == [1, 2]
    # report_task_using_checkpoint recorded the link: reporting it again is idempotent
    again = api.post(
        "/api/v1/trial-source-info",
        {
            "trialSourceInfo": {
                "checkpointUuid": source["uuid"],
                "trialId": trial["id"],
                "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_INFERENCE",
            }
        },
    )
    assert again == {"checkpointUuid": source["uuid"], "trialId": trial["id"]}

    # what the SDK reads back through the link: Checkpoint.get_metrics(), and
    # ModelVersion.iter_metrics() once a trial reports the version it used
    model = api.post("/api/v1/models", {"name": "calls-model"})["model"]
    api.post("/api/v1/models/calls-model/versions", {"checkpointUuid": source["uuid"]})
    api.post(
        "/api/v1/trial-source-info",
        {
            "trialSourceInfo": {
                "checkpointUuid": source["uuid"],
                "trialId": trial["id"],
                "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_INFERENCE",
                "modelId": model["id"],
                "modelVersion": 1,
            }
        },
    )
    found = sdk_result(
        det_venv,
        admin,
        HARNESS / "calls_client.py",
        "sources",
        source["uuid"],
        "calls-model",
        marker="CALLS_RESULT",
    )
    training = [[trial["id"], "training", step] for step in (1, 2)]
    assert [row[:3] for row in found["checkpoint"]] == training
    assert found["checkpoint"][0][3]["loss"] == 1.0
    assert found["checkpoint_validation"] == [[trial["id"], "validation", 2, {"loss": 0.5}]]
    assert [row[:3] for row in found["model_version"]] == training


def test_source_trial_id_starts_from_its_latest_checkpoint(
    api: Api, source: dict[str, Any]
) -> None:
    exp_id = _create(api, 2, f"  source_trial_id: {source['trial']['id']}\n", activate=False)
    try:
        (trial,) = api.wait_until(lambda: api.trials(exp_id), timeout=30, what="the trial")
        assert trial["warmStartCheckpointUuid"] == source["uuid"]
    finally:
        api.post(f"/api/v1/experiments/{exp_id}/kill")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("  source_trial_id: 999999\n", "trial 999999 not found"),
        ("  source_checkpoint_uuid: not-a-uuid\n", "invalid source checkpoint UUID"),
        (
            "  source_checkpoint_uuid: 00000000-0000-0000-0000-000000000000\n",
            "no checkpoint found with UUID",
        ),
    ],
)
def test_a_missing_warm_start_source_is_refused(
    stalwart_master: MasterProcess, api: Api, extra: str, expected: str
) -> None:
    config = (
        "name: bad-source\nentrypoint: python3 x.py\nhyperparameters: {}\n"
        "searcher:\n  name: single\n  metric: loss\n  max_length:\n    batches: 1\n" + extra
    )
    response = api.http.post(
        "/api/v1/experiments", json={"config": config, "modelDefinition": [], "activate": False}
    )
    assert response.status_code in (400, 404), response.text
    assert expected in response.json()["message"]


def test_trial_source_info_needs_an_existing_checkpoint(api: Api, source: dict[str, Any]) -> None:
    response = api.http.post(
        "/api/v1/trial-source-info",
        json={
            "trialSourceInfo": {
                "checkpointUuid": "00000000-0000-0000-0000-000000000000",
                "trialId": source["trial"]["id"],
                "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_INFERENCE",
            }
        },
    )
    assert response.status_code == 404, response.text
    assert "checkpoint 00000000-0000-0000-0000-000000000000 not found" in response.text


def test_det_version_reads_the_masters_version_without_warnings(
    det: Det, stalwart_master: MasterProcess
) -> None:
    done = det.ok("version")
    assert f"version: {WIRE_VERSION}" in done.stdout.split("master:", 1)[1], describe(done)
    info = httpx.get(f"{stalwart_master.url}/info", timeout=10).json()
    assert f"cluster_id: {info['cluster_id']}" in done.stdout, describe(done)
    assert done.stderr == "", describe(done)  # no "Master not found" / version-mismatch notes


def test_det_auth_list_providers_finds_none(det: Det) -> None:
    # the official client reads /info's sso_providers; without the key it calls this an
    # enterprise-only feature
    done = det.ok("auth", "list-providers")
    assert "No SSO providers found." in done.stdout, describe(done)


def test_det_agent_list_shows_the_wire_version(
    admin: Det, agent: LocalCluster, stalwart_master: MasterProcess
) -> None:
    rows = json.loads(admin.ok("agent", "list", "--json").stdout)
    (calls,) = [row for row in rows if row["id"] == "calls"]
    assert calls["version"] == WIRE_VERSION
