"""Log retention with the official 0.38.1 client: ``det e set log-retention``, ``det trial set
log-retention``, ``det task cleanup-logs``, and the ``bindings`` calls of the web UI (remaining
days, the bulk form).

The module's master keeps trials' logs 0 days (``retention_policy.log_retention_days: 0``): an
ended trial's logs expire at once unless its experiment or the trial says otherwise. One grid
experiment of two trials (``workflows/trial.py``, ``STEP <n>`` in their logs) runs on a local
agent; the assertions are what a user relies on: the numbers the client shows, and which logs
are still there after a cleanup.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from stalwart.local import LocalCluster
from tests.compat.conftest import (
    Det,
    MasterProcess,
    _start_master,
    _stop,
    describe,
    det_at,
    local_agent,
    logged_in_admin,
    sdk_result,
)

pytestmark = pytest.mark.compat

WORKFLOWS = Path(__file__).parent / "workflows"
WAIT_S = 90


@pytest.fixture(scope="module")
def stalwart_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """A master that keeps trials' logs 0 days after they end."""
    workdir = tmp_path_factory.mktemp("retention-master")
    config = workdir / "master.yaml"
    config.write_text("retention_policy:\n  log_retention_days: 0\n", encoding="utf-8")
    master = _start_master(workdir, ["--config", str(config)])
    try:
        yield master
    finally:
        _stop(master.process)


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    yield from local_agent(stalwart_master, "retention", 2)


@pytest.fixture(scope="module")
def admin(
    det_venv: Path,
    stalwart_master: MasterProcess,
    agent: LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Det:
    return logged_in_admin(det_venv, stalwart_master, tmp_path_factory)


@pytest.fixture(scope="module")
def ended(admin: Det, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list[int]]:
    """A completed two-trial grid experiment: ``(experiment id, trial ids)``."""
    model = tmp_path_factory.mktemp("model")
    shutil.copy(WORKFLOWS / "trial.py", model / "trial.py")
    config = model / "grid.yaml"
    config.write_text(
        "name: retention\nentrypoint: python3 trial.py\n"
        "hyperparameters:\n  steps: 2\n  sleep: 0\n"
        "  which:\n    type: categorical\n    vals: [a, b]\n"
        "searcher:\n  name: grid\n  metric: loss\n  max_concurrent_trials: 2\n"
        "max_restarts: 0\n",
        encoding="utf-8",
    )
    created = admin.ok("experiment", "create", str(config), str(model))
    found = re.search(r"Created experiment (\d+)", created.stdout)
    assert found, describe(created)
    exp_id = int(found.group(1))
    waited = admin.run("experiment", "wait", str(exp_id), "--polling-interval", "1", timeout=WAIT_S)
    assert waited.returncode == 0, describe(waited)
    listed = admin.ok("experiment", "list-trials", str(exp_id)).stdout
    ids = sorted(int(i) for i in re.findall(r"^\s*(\d+) \|", listed, re.MULTILINE))
    assert len(ids) == 2, listed
    return exp_id, ids


def _remaining(det_venv: Path, admin: Det, trial_id: int) -> object:
    got = sdk_result(det_venv, admin, WORKFLOWS / "retention_sdk.py", "remaining", str(trial_id))
    return got["remainingDays"]


def test_retention_days_follow_master_experiment_and_trial(
    det_venv: Path, admin: Det, ended: tuple[int, list[int]]
) -> None:
    exp_id, (first, second) = ended
    # the master's 0 days: expired as soon as the trial ended
    assert _remaining(det_venv, admin, first) == 0

    admin.ok("experiment", "set", "log-retention", str(exp_id), "--days", "5")
    config = yaml.safe_load(admin.ok("experiment", "config", str(exp_id)).stdout)
    assert config["retention_policy"]["log_retention_days"] == 5
    assert _remaining(det_venv, admin, first) == 4  # 5 days less the seconds since it ended
    assert _remaining(det_venv, admin, second) == 4

    admin.ok("trial", "set", "log-retention", str(first), "--forever")
    admin.ok("trial", "set", "log-retention", str(second), "--days", "0")
    assert _remaining(det_venv, admin, first) == -1
    assert _remaining(det_venv, admin, second) == 0

    refused = admin.run("trial", "set", "log-retention", str(first), "--days", "40000")
    assert refused.returncode != 0
    assert "allowed range is between -1 and 32767" in refused.stdout + refused.stderr


def test_cleanup_deletes_expired_logs_and_keeps_retained_ones(
    det_venv: Path, admin: Det, ended: tuple[int, list[int]]
) -> None:
    _exp_id, (first, second) = ended
    admin.ok("trial", "set", "log-retention", str(first), "--forever")
    admin.ok("trial", "set", "log-retention", str(second), "--days", "0")
    before = admin.ok("trial", "logs", str(second)).stdout
    assert "STEP 2" in before
    assert "STEP 2" in admin.ok("trial", "logs", str(first)).stdout

    done = admin.ok("task", "cleanup-logs")
    found = re.fullmatch(r"Deleted (\d+) rows of log entries\.\n", done.stdout)
    assert found, describe(done)
    lines = [ln for ln in before.splitlines() if ln.startswith("[")]  # not the client's footer
    assert int(found.group(1)) == len(lines) > 0  # exactly the expired trial's lines

    assert "STEP" not in admin.ok("trial", "logs", str(second)).stdout  # expired: gone
    assert "STEP 2" in admin.ok("trial", "logs", str(first)).stdout  # kept forever
    again = admin.ok("task", "cleanup-logs")
    assert again.stdout == "Deleted 0 rows of log entries.\n"


def test_cleanup_logs_is_for_admins(
    det_venv: Path, admin: Det, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    admin.ok("user", "create", "retention-user", "--password", "Passw0rd!")
    user = det_at(det_venv, stalwart_master, tmp_path)
    user.login("retention-user", "Passw0rd!")
    refused = user.run("task", "cleanup-logs")
    assert refused.returncode != 0
    assert "admin" in refused.stdout + refused.stderr


def test_bulk_retention_of_a_project_answers_per_experiment(
    det_venv: Path, admin: Det, ended: tuple[int, list[int]]
) -> None:
    exp_id, (first, _second) = ended
    described = json.loads(admin.ok("experiment", "describe", str(exp_id), "--json").stdout)
    project = int(described[0]["experiment"]["projectId"])
    results = sdk_result(
        det_venv,
        admin,
        WORKFLOWS / "retention_sdk.py",
        "bulk",
        str(project),
        "7",
        str(exp_id),
        "999999",
    )
    assert results[0] == {"id": exp_id, "error": ""}
    assert results[1]["id"] == 999999
    assert "not found" in results[1]["error"]
    assert _remaining(det_venv, admin, first) == 6
