"""Without private mount namespaces, tasks written for Determined still run unchanged on the
agent: one at a time per node, with ``/run/determined`` and ``/determined_shared_fs`` linked to
the running task's files (``stalwart.agent.fixedpaths``), and each such task's log says why.

The agent runs with ``--mount-namespaces off`` (what a node that allows none ends up with) and
two slots; a grid of two official-harness trials asks for both at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.agent.fixedpaths import WAITING
from stalwart.local import LocalCluster
from tests.compat.test_det_harness import (
    HARNESS,
    IMAGE,
    MASTER_CONFIG,
    _completed,
    _free_port,
    _host_path,
    _infos,
)
from tests.integration.api import Api

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def cluster(det_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A master and a two-slot agent that gives tasks no mount namespace."""
    work = tmp_path_factory.mktemp("harness-fallback")
    config = work / "master.yaml"
    config.write_text(MASTER_CONFIG)
    local = LocalCluster(home=work / "home", port=_free_port(), master_config=config)
    local.start_master()
    try:
        local.start_agent(
            "fallback",
            slots=2,
            extra=["--python", f"{IMAGE}={det_venv}", "--mount-namespaces", "off"],
        )
        yield local
    finally:
        local.stop()


def test_official_harness_trials_run_one_at_a_time_without_namespaces(
    cluster: LocalCluster,
) -> None:
    hparams = "  steps: 4\n  sleep: 0.3\n  which:\n    type: categorical\n    vals: [a, b]\n"
    config = (
        "name: official-harness-fallback\nentrypoint: python3 core_trial.py\n"
        f"environment:\n  image: {IMAGE}\nhyperparameters:\n{hparams}max_restarts: 0\n"
        "searcher:\n  name: grid\n  metric: loss\n  max_concurrent_trials: 2\n"
    )
    api = Api(cluster.url)
    try:
        exp_id = api.create_experiment(
            config, {"core_trial.py": (HARNESS / "core_trial.py").read_text()}
        )
        trials = _completed(api, exp_id, timeout=180)
        logs = {trial["id"]: api.logs(trial["id"]) for trial in trials}
        checkpoints = api.checkpoints(exp_id)
    finally:
        api.close()
    assert len(trials) == 2
    for trial in trials:
        text = logs[trial["id"]]
        assert "tasks written for the official `determined` harness run one at a time" in text
        (info,) = _infos(text)  # det.get_cluster_info() is this trial's own
        assert info["trial_id"] == trial["id"]
        assert info["model_copy"] == ["core_trial.py"]
        assert info["workdir"] is True
    assert sum(WAITING in text for text in logs.values()) == 1, "one trial waited for the other"
    kept = [c for c in checkpoints if c["state"] == "STATE_COMPLETED"]
    assert {c["training"]["trialId"] for c in kept} == {trial["id"] for trial in trials}
    for checkpoint in kept:  # written to /determined_shared_fs, found at the host path
        state = _host_path(cluster) / checkpoint["uuid"] / "state.json"
        assert json.loads(state.read_text())["step"] == checkpoint["metadata"]["steps_completed"]
