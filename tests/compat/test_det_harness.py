"""Tasks written for Determined (``import determined as det``) run on Stalwart's agent with the
official 0.38.1 harness from the det venv, unmodified.

The agent maps the experiments' image to the det venv (``--python``) and gives each task its own
mount namespace (``--mount-namespaces require``): ``/run/determined`` is the task's run directory
and ``/determined_shared_fs`` the master's ``shared_fs`` checkpoint directory. The trial script
is ``harness/core_trial.py``; its hyperparameters choose what it exercises.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stalwart.agent.isolation import SHARED_FS_TARGET, probe
from stalwart.local import LocalCluster
from tests.integration.api import Api

pytestmark = pytest.mark.compat

HARNESS = Path(__file__).parent / "harness"
IMAGE = "stalwart-compat/det-venv"
MASTER_CONFIG = """\
cluster:
  agent_timeout: 15
  preemption_timeout: 30
  kill_grace: 3
  tick: 0.5
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(det_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A master and a two-slot agent running the det venv's Python in mount namespaces."""
    work = tmp_path_factory.mktemp("harness")
    found = probe(work / "probe")
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"no mount namespaces for tasks: {found} (required under CI=true)")
        pytest.skip(f"no mount namespaces for tasks here: {found}")
    config = work / "master.yaml"
    config.write_text(MASTER_CONFIG)
    local = LocalCluster(home=work / "home", port=_free_port(), master_config=config)
    local.start_master()
    try:
        local.start_agent(
            "harness",
            slots=2,
            extra=["--python", f"{IMAGE}={det_venv}", "--mount-namespaces", "require"],
        )
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> Iterator[Api]:
    client = Api(cluster.url)
    try:
        yield client
    finally:
        client.close()


def _create(api: Api, hparams: dict[str, Any], *, extra: str = "", restarts: int = 0) -> int:
    hp = "".join(f"  {key}: {json.dumps(value)}\n" for key, value in hparams.items())
    config = (
        "name: official-harness\n"
        "entrypoint: python3 core_trial.py\n"
        f"environment:\n  image: {IMAGE}\n"
        f"hyperparameters:\n{hp}"
        f"max_restarts: {restarts}\n" + (extra or "searcher:\n  name: single\n  metric: loss\n")
    )
    files = {"core_trial.py": (HARNESS / "core_trial.py").read_text()}
    return api.create_experiment(config, files)


def _infos(logs: str) -> list[dict[str, Any]]:
    """The ``CLUSTER_INFO`` lines of a trial's log, one per run."""
    return [
        json.loads(line.split("CLUSTER_INFO ", 1)[1])
        for line in logs.splitlines()
        if "CLUSTER_INFO " in line
    ]


def _completed(api: Api, exp_id: int, timeout: float = 120.0) -> list[dict[str, Any]]:
    exp = api.wait_state(exp_id, timeout=timeout)
    trials = api.trials(exp_id)
    if exp["state"] != "STATE_COMPLETED":
        logs = "\n".join(api.logs(trial["id"])[-3000:] for trial in trials)
        raise AssertionError(f"experiment {exp_id} ended {exp['state']}:\n{logs}")
    return trials


def _host_path(cluster: LocalCluster) -> Path:
    return cluster.home / "checkpoints"  # the master's default shared_fs storage


def test_core_api_trial_with_metrics_and_checkpoints(cluster: LocalCluster, api: Api) -> None:
    exp_id = _create(api, {"steps": 6})
    (trial,) = _completed(api, exp_id)
    (info,) = _infos(api.logs(trial["id"]))
    # det.get_cluster_info() in the task is this trial's
    assert info["trial_id"] == trial["id"]
    assert info["experiment_id"] == exp_id
    assert info["allocation_id"].startswith(info["task_id"] + ".")
    assert info["hparams"] == {"steps": 6}
    assert info["latest_checkpoint"] is None
    assert len(info["container_addrs"]) == 1
    assert info["model_copy"] == ["core_trial.py"]  # /run/determined/train/model
    assert info["workdir"] is True  # the working directory is /run/determined/workdir
    assert [int(m["totalBatches"]) for m in api.metrics(trial["id"])] == [1, 2, 3, 4, 5, 6]
    assert [int(m["totalBatches"]) for m in api.metrics(trial["id"], "validation")] == [6]
    checkpoints = api.checkpoints(exp_id)
    assert sorted(c["metadata"]["steps_completed"] for c in checkpoints) == [2, 4, 6]
    kept = [c for c in checkpoints if c["state"] == "STATE_COMPLETED"]  # GC removes the others
    assert kept
    for checkpoint in kept:  # written to /determined_shared_fs, found at the host path
        state = _host_path(cluster) / checkpoint["uuid"] / "state.json"
        assert json.loads(state.read_text())["step"] == checkpoint["metadata"]["steps_completed"]
        assert not (Path(SHARED_FS_TARGET) / checkpoint["uuid"]).exists()
    # the default core.init() writes TensorBoard files and uploads them to the same storage
    events = f"*/tensorboard/experiment/{exp_id}/trial/{trial['id']}/events.out.tfevents.*"
    assert list(_host_path(cluster).glob(events))


def test_a_restart_restores_the_latest_checkpoint(api: Api) -> None:
    exp_id = _create(api, {"steps": 4, "fail_at": 2}, restarts=1)
    (trial,) = _completed(api, exp_id)
    logs = api.logs(trial["id"])
    assert "FAILING on purpose" in logs
    assert "RESTORED step=2" in logs
    first, second = _infos(logs)
    step_two = [c for c in api.checkpoints(exp_id) if c["metadata"]["steps_completed"] == 2]
    assert first["latest_checkpoint"] is None
    assert second["latest_checkpoint"] == step_two[0]["uuid"]
    assert trial["restarts"] == 1


def test_concurrent_trials_see_only_their_own_files(api: Api) -> None:
    searcher = "searcher:\n  name: grid\n  metric: loss\n  max_concurrent_trials: 2\n"
    hparams: dict[str, Any] = {"steps": 2, "meet": 2}
    hp_lines = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in hparams.items())
    hp_lines += "  which:\n    type: categorical\n    vals: [a, b]\n"
    config = (
        "name: official-harness-concurrent\nentrypoint: python3 core_trial.py\n"
        f"environment:\n  image: {IMAGE}\nhyperparameters:\n{hp_lines}max_restarts: 0\n" + searcher
    )
    exp_id = api.create_experiment(
        config, {"core_trial.py": (HARNESS / "core_trial.py").read_text()}
    )
    trials = _completed(api, exp_id)
    assert len(trials) == 2
    for trial in trials:
        logs = api.logs(trial["id"])
        (info,) = _infos(logs)
        seen = json.loads(logs.split("SEEN ", 1)[1].splitlines()[0])
        assert seen == {
            "markers": [f"mine-{trial['id']}"],
            "allocation_id": info["allocation_id"],
        }


def test_pause_preempts_and_activate_resumes(api: Api) -> None:
    exp_id = _create(api, {"steps": 200, "sleep": 0.1})
    api.wait_until(lambda: api.checkpoints(exp_id), timeout=60, what="a checkpoint")
    (trial,) = api.trials(exp_id)
    trial_id = trial["id"]
    api.post(f"/api/v1/experiments/{exp_id}/pause")
    api.wait_until(lambda: "PREEMPTED step=" in api.logs(trial_id), timeout=60, what="preemption")
    api.wait_until(
        lambda: api.trials(exp_id)[0]["state"] == "STATE_PAUSED", timeout=30, what="the pause"
    )
    paused_at = int(api.logs(trial_id).split("PREEMPTED step=", 1)[1].split()[0])
    api.post(f"/api/v1/experiments/{exp_id}/activate")
    api.wait_until(
        lambda: f"RESTORED step={paused_at}" in api.logs(trial_id),
        timeout=60,
        what="the resumed run",
    )
    api.post(f"/api/v1/experiments/{exp_id}/kill")
    assert api.wait_state(exp_id, timeout=60)["state"] == "STATE_CANCELED"


def test_an_adaptive_asha_search(api: Api) -> None:
    searcher = (
        "searcher:\n  name: adaptive_asha\n  metric: loss\n  smaller_is_better: true\n"
        "  max_trials: 4\n  max_concurrent_trials: 2\n  time_metric: batches\n  max_time: 8\n"
    )
    hp = {"steps": 8, "validate": True}
    lr = "  lr:\n    type: double\n    minval: 0.1\n    maxval: 1.0\n"
    config = (
        "name: official-harness-asha\nentrypoint: python3 core_trial.py\n"
        f"environment:\n  image: {IMAGE}\nhyperparameters:\n"
        + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in hp.items())
        + lr
        + "max_restarts: 0\n"
        + searcher
    )
    exp_id = api.create_experiment(
        config, {"core_trial.py": (HARNESS / "core_trial.py").read_text()}
    )
    trials = _completed(api, exp_id, timeout=180)
    assert len(trials) == 4
    assert {trial["state"] for trial in trials} == {"STATE_COMPLETED"}
    for trial in trials:
        steps = [int(m["totalBatches"]) for m in api.metrics(trial["id"], "validation")]
        assert steps
        assert steps == sorted(steps)
        assert max(steps) <= 8


def test_two_workers_allgather(api: Api) -> None:
    config = (
        "name: official-harness-allgather\nentrypoint: python3 allgather_trial.py\n"
        f"environment:\n  image: {IMAGE}\nresources:\n  slots_per_trial: 2\n"
        "max_restarts: 0\nsearcher:\n  name: single\n  metric: loss\n"
    )
    exp_id = api.create_experiment(
        config, {"allgather_trial.py": (HARNESS / "allgather_trial.py").read_text()}
    )
    (trial,) = _completed(api, exp_id)
    logs = api.logs(trial["id"])
    assert "ALLGATHER rank=0 got=[0, 1]" in logs
    assert "ALLGATHER rank=1 got=[0, 1]" in logs
    (validation,) = api.metrics(trial["id"], "validation")
    assert validation["metrics"]["validation_metrics"]["loss"] == 1.0
