"""``det e continue`` with the official ``det`` CLI (determined 0.38.1) and a Core API trial run by
the official harness on a real agent.

A single-trial experiment trains to ``searcher.max_length``, completes, and is continued with a
larger length: the same trial resumes from its latest checkpoint's steps and reaches the new
length; its metrics and checkpoints go on from there. The refusals: an active experiment, a
multi-trial search, an override that changes the hyperparameters.

The agent maps the experiments' image to the det venv (``--python``) and runs each task in its
own mount namespace, as ``test_det_harness.py`` explains.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from stalwart.agent.isolation import probe
from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess, describe
from tests.integration.api import Api

pytestmark = pytest.mark.compat

HARNESS = Path(__file__).parent / "harness"
IMAGE = "stalwart-compat/det-venv"
WAIT_S = 180.0


@pytest.fixture(scope="module")
def agent(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """A two-slot agent of the module's master that runs the det venv's Python."""
    found = probe(tmp_path_factory.mktemp("probe") / "probe")
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"no mount namespaces for tasks: {found} (required under CI=true)")
        pytest.skip(f"no mount namespaces for tasks here: {found}")
    port = urlparse(stalwart_master.url).port
    assert port is not None
    cluster = LocalCluster(home=stalwart_master.home, port=port)
    cluster.start_agent(
        "continue",
        slots=2,
        extra=["--python", f"{IMAGE}={det_venv}", "--mount-namespaces", "require"],
    )
    try:
        yield cluster
    finally:
        cluster.stop_agent("continue")


@pytest.fixture(scope="module")
def api(stalwart_master: MasterProcess) -> Iterator[Api]:
    client = Api(stalwart_master.url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "continue_trial.py").write_text((HARNESS / "continue_trial.py").read_text())
    return model


def _config(tmp_path: Path, *, length: int, searcher: str = "single", sleep: float = 0) -> Path:
    hparams: dict[str, object] = {"sleep": sleep}
    if searcher == "grid":
        hparams["which"] = {"type": "categorical", "vals": ["a", "b"]}
    config = {
        "name": f"continue-{searcher}",
        "entrypoint": "python3 continue_trial.py",
        "environment": {"image": IMAGE},
        "hyperparameters": hparams,
        "max_restarts": 0,
        "searcher": {"name": searcher, "metric": "loss", "max_length": {"batches": length}},
    }
    path = tmp_path / f"{searcher}-{length}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _create(det: Det, config: Path, model_dir: Path) -> int:
    done = det.ok("experiment", "create", str(config), str(model_dir))
    return int(done.stdout.split("Created experiment ")[1].split()[0])


def _wait(det: Det, api: Api, exp_id: int) -> None:
    done = det.run("experiment", "wait", str(exp_id), "--polling-interval", "1", timeout=WAIT_S)
    if done.returncode != 0:
        logs = "\n".join(api.logs(t["id"])[-3000:] for t in api.trials(exp_id))
        raise AssertionError(f"{describe(done)}\n--- trial logs\n{logs}")


def _state(det: Det, exp_id: int) -> str:
    (described,) = json.loads(det.ok("experiment", "describe", str(exp_id), "--json").stdout)
    return str(described["experiment"]["state"])


def test_continue_trains_the_same_trial_on_from_its_latest_checkpoint(
    det: Det, agent: LocalCluster, api: Api, model_dir: Path, tmp_path: Path
) -> None:
    det.login("admin")
    exp_id = _create(det, _config(tmp_path, length=4), model_dir)
    _wait(det, api, exp_id)
    (trial,) = api.trials(exp_id)
    assert "TRAINED to=4" in api.logs(trial["id"])
    assert [int(m["totalBatches"]) for m in api.metrics(trial["id"])] == [1, 2, 3, 4]

    done = det.run(
        "experiment",
        "continue",
        str(exp_id),
        "--config",
        "searcher.max_length.batches=8",
        "-f",  # follow the continued trial's logs until it ends
        timeout=WAIT_S,
    )
    assert done.returncode == 0, describe(done)
    assert f"Continued experiment {exp_id}" in done.stdout
    assert "TRAINED to=8" in done.stdout
    _wait(det, api, exp_id)
    assert _state(det, exp_id) == "STATE_COMPLETED"

    (again,) = api.trials(exp_id)  # the same trial, not a new one
    assert again["id"] == trial["id"]
    assert again["state"] == "STATE_COMPLETED"
    logs = api.logs(trial["id"])
    assert "RESTORED step=4" in logs  # from the latest checkpoint's steps
    assert "TRAINED to=8" in logs
    steps = [int(m["totalBatches"]) for m in api.metrics(trial["id"])]
    assert steps == [1, 2, 3, 4, 5, 6, 7, 8]  # each step once, in order
    validations = [int(m["totalBatches"]) for m in api.metrics(trial["id"], "validation")]
    assert validations == [4, 8]
    checkpoint_steps = {c["metadata"]["steps_completed"] for c in api.checkpoints(exp_id)}
    assert {4, 8} <= checkpoint_steps
    (described,) = json.loads(det.ok("experiment", "describe", str(exp_id), "--json").stdout)
    assert described["config"]["searcher"]["max_length"] == {"batches": 8}

    # --config-file, and a change that cannot apply: the trial keeps its hyperparameters
    override = tmp_path / "override.yaml"
    override.write_text("hyperparameters:\n  sleep: 1\n")
    refused = det.run("experiment", "continue", str(exp_id), "--config-file", str(override))
    assert refused.returncode != 0
    assert "cannot change 'hyperparameters'" in refused.stdout + refused.stderr
    assert _state(det, exp_id) == "STATE_COMPLETED"


def test_an_active_experiment_is_not_continued(
    det: Det, agent: LocalCluster, api: Api, model_dir: Path, tmp_path: Path
) -> None:
    det.login("admin")
    exp_id = _create(det, _config(tmp_path, length=200, sleep=0.2), model_dir)
    refused = det.run("experiment", "continue", str(exp_id), "--config", "max_restarts=1")
    assert refused.returncode != 0, describe(refused)
    assert "is in state STATE_ACTIVE: only a finished" in refused.stdout + refused.stderr
    det.ok("experiment", "kill", str(exp_id))
    api.wait_state(exp_id, timeout=WAIT_S)


def test_a_multi_trial_search_is_not_continued(
    det: Det, agent: LocalCluster, api: Api, model_dir: Path, tmp_path: Path
) -> None:
    det.login("admin")
    exp_id = _create(det, _config(tmp_path, length=2, searcher="grid"), model_dir)
    _wait(det, api, exp_id)
    assert len(api.trials(exp_id)) == 2
    refused = det.run("experiment", "continue", str(exp_id))
    assert refused.returncode != 0, describe(refused)
    assert "is a grid search: only a single-trial experiment" in refused.stdout + refused.stderr
    assert _state(det, exp_id) == "STATE_COMPLETED"
