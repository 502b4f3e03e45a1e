"""Calls of the official 0.38.1 client that need no agent, against a real Stalwart master:
``det preview-search`` (grid, random), ``det master config set --log.level`` (admins only; what
cannot change is refused), ``det workspace list-pools`` (honouring resource-pool bindings), the
SDK's ``Experiment.add_label`` / ``remove_label`` from eight threads at once, and experiments
created without model files (``det experiment create CONFIG`` and the SDK's
``create_experiment(config, model_dir=None)``, which sends ``modelDefinition: null``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.conftest import (
    Det,
    MasterProcess,
    _start_master,
    _stop,
    det_at,
    logged_in_admin,
    sdk_result,
)

pytestmark = pytest.mark.compat

WORKFLOWS = Path(__file__).resolve().parent / "workflows"
PASSWORD = "Long-password-1"
HPS = (
    "hyperparameters:\n"
    "  lr:\n    type: double\n    minval: 0.001\n    maxval: 0.1\n    count: 3\n"
    "  layers:\n    type: categorical\n    vals: [1, 2]\n"
    "  width: 64\n"
)
NO_FILES = (
    "name: no-files\nentrypoint: python3 -c 'print(1)'\n"
    "searcher:\n  name: single\n  metric: loss\n  max_length: 1\n"
)


@pytest.fixture(scope="module")
def stalwart_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """A master with a second resource pool besides ``default``."""
    workdir = tmp_path_factory.mktemp("master")
    (workdir / "master.yaml").write_text("resource_pools:\n  - pool_name: second\n")
    master = _start_master(workdir, ["--config", str(workdir / "master.yaml")])
    try:
        yield master
    finally:
        _stop(master.process)


@pytest.fixture(scope="module")
def admin(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Det:
    cli = logged_in_admin(det_venv, stalwart_master, tmp_path_factory)
    cli.ok("user", "create", "carol", "--password", PASSWORD)
    return cli


@pytest.fixture
def carol(det_venv: Path, stalwart_master: MasterProcess, admin: Det, tmp_path: Path) -> Det:
    cli = det_at(det_venv, stalwart_master, tmp_path / "carol")
    cli.login("carol", PASSWORD)
    return cli


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_preview_search_prints_the_grid_and_random_plans(admin: Det, tmp_path: Path) -> None:
    grid = _write(
        tmp_path,
        "grid.yaml",
        "entrypoint: python3 train.py\n" + HPS + "searcher:\n  name: grid\n  metric: loss\n"
        "  max_length:\n    batches: 100\n",
    )
    out = admin.ok("preview-search", grid).stdout
    assert "Using search configuration:" in out
    assert "name: grid" in out
    assert "metric: loss" in out
    # 3 lr values x 2 layers: six trials, each trained to completion
    rows = [ln.split("|") for ln in out.splitlines() if "|" in ln]
    assert [[c.strip() for c in r] for r in rows[1:]] == [["6", "train to completion"]], out
    random = _write(
        tmp_path,
        "random.yaml",
        "entrypoint: python3 train.py\n" + HPS + "searcher:\n  name: random\n  metric: loss\n"
        "  max_trials: 7\n  max_length:\n    batches: 10\n",
    )
    out = admin.ok("preview-search", random).stdout
    assert "name: random" in out
    assert "max_trials: 7" in out
    rows = [ln.split("|") for ln in out.splitlines() if "|" in ln]
    assert [[c.strip() for c in r] for r in rows[1:]] == [["7", "train to completion"]], out


def test_preview_search_plans_adaptive_asha_by_rung(admin: Det, tmp_path: Path) -> None:
    asha = _write(
        tmp_path,
        "asha.yaml",
        "entrypoint: python3 train.py\n" + HPS + "searcher:\n  name: adaptive_asha\n"
        "  metric: loss\n  max_trials: 16\n  time_metric: batches\n  max_time: 100\n",
    )
    out = admin.ok("preview-search", asha).stdout
    rows = [[c.strip() for c in ln.split("|")] for ln in out.splitlines() if "|" in ln]
    # brackets of 3 and 2 rungs (divisor 4); 16 trials split 12/4 over them
    assert rows[1:] == [
        ["9", "train for 6 batches"],
        ["5", "train for 25 batches"],
        ["2", "train for 100 batches"],
    ], out
    assert sum(int(r[0]) for r in rows[1:]) == 16


def test_preview_search_refuses_an_invalid_searcher(admin: Det, tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.yaml", "searcher:\n  name: random\n  metric: loss\n")
    done = admin.run("preview-search", bad)
    assert done.returncode != 0
    assert "max_trials" in done.stdout + done.stderr


def test_master_config_set_changes_the_log_level_for_admins_only(admin: Det, carol: Det) -> None:
    done = admin.ok("master", "config", "set", "--log.level", "DEBUG")
    assert "Successfully made changes to the master config." in done.stdout
    shown = json.loads(admin.ok("master", "config", "show", "--json").stdout)
    assert shown["log"]["level"] == "debug"
    admin.ok("master", "config", "set", "--log.level", "INFO")
    assert json.loads(admin.ok("master", "config", "--json").stdout)["log"]["level"] == "info"
    refused = carol.run("master", "config", "set", "--log.level", "DEBUG")
    assert refused.returncode != 0
    assert "admin" in refused.stdout + refused.stderr
    color = admin.run("master", "config", "set", "--log.color", "on")
    assert color.returncode != 0
    assert "log.color cannot be changed" in color.stdout + color.stderr
    assert json.loads(admin.ok("master", "config", "--json").stdout)["log"]["level"] == "info"


def _pools(cli: Det, workspace: str) -> str:
    out = cli.ok("workspace", "list-pools", workspace).stdout
    row = next(ln for ln in out.splitlines() if ln.strip().startswith(workspace))
    return row.split("|")[1].strip()


def test_workspace_list_pools_honours_bindings(admin: Det) -> None:
    admin.ok("workspace", "create", "team")
    assert _pools(admin, "Uncategorized") == "default, second"
    admin.ok("resource-pool", "bindings", "add", "second", "team")
    try:
        assert _pools(admin, "team") == "default, second"
        assert _pools(admin, "Uncategorized") == "default"
    finally:
        admin.ok("resource-pool", "bindings", "remove", "second", "team")
    assert _pools(admin, "Uncategorized") == "default, second"


def test_experiment_labels_from_the_sdk_and_experiments_without_files(
    det_venv: Path, admin: Det, tmp_path: Path
) -> None:
    config = _write(tmp_path, "no-files.yaml", NO_FILES)
    created = admin.ok("experiment", "create", config, "--paused").stdout
    assert "Created experiment" in created
    result = sdk_result(det_venv, admin, WORKFLOWS / "labels_sdk.py", config)
    every = [f"t{i}" for i in range(8)]
    assert result["after_add"] == every  # no thread's label lost, t3 once
    assert result["after_remove"] == every[1:]
    assert result["stored"] == every[1:]
    assert result["config_labels"] == every[1:]
