"""Editing experiments and reading the cluster with the official 0.38.1 client, on Stalwart.

Commands served by the master and proven here with the unmodified ``det``: ``master config``,
``experiment set name|description|max-slots|priority|weight``, ``experiment label add|remove``,
``trial kill``, ``experiment archive|unarchive|delete``, and ``GET /api/v1/resource-pools``
(0.38.1 has no ``det resource-pool list``; ``det job list`` and the SDK read it) through the
official bindings. One real master and one two-slot agent serve the module (the fixtures of
``test_det_workflows``).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.compat.conftest import Det, sdk_result
from tests.compat.test_det_workflows import (
    AGENT_ID,
    WAIT_S,
    WORKFLOWS,
    _config,
    _created_id,
    _experiment,
    _trial_id,
    _wait_state,
    admin,
    agent,
    model_dir,
)

__all__ = ["admin", "agent", "model_dir"]  # module-scoped fixtures, shared by import

pytestmark = pytest.mark.compat


def _config_of(cli: Det, exp_id: int) -> dict[str, object]:
    described = json.loads(cli.ok("experiment", "describe", str(exp_id), "--json").stdout)
    config: dict[str, object] = described[0]["experiment"]["config"]
    return config


@pytest.fixture(scope="module")
def paused(admin: Det, model_dir: Path) -> int:
    """A paused experiment (never runs), to edit."""
    config = _config(model_dir.parent, "editable", steps=2, sleep=0.0)
    exp_id = _created_id(admin.ok("experiment", "create", config, str(model_dir), "--paused"))
    _wait_state(admin, exp_id, "STATE_PAUSED")
    return exp_id


def test_master_config(admin: Det) -> None:
    config = json.loads(admin.ok("master", "config", "--json").stdout)
    assert isinstance(config, dict)
    assert config  # the master's effective settings
    assert "port" in admin.ok("master", "config").stdout  # YAML rendering


def test_resource_pools_through_the_official_bindings(admin: Det, det_venv: Path) -> None:
    result = sdk_result(
        det_venv, admin, WORKFLOWS / "resource_pools.py", marker="POOLS_RESULT", timeout=60
    )
    assert result["priority"] is True
    (default,) = [p for p in result["pools"] if p["name"] == "default"]
    assert default["default"] is True
    assert default["agents"] == 1
    assert default["slots"] == 2
    assert default["slot_type"] == "TYPE_CPU"
    assert default["scheduler"] == "SCHEDULER_TYPE_PRIORITY"


def test_set_name_description_and_labels(admin: Det, paused: int) -> None:
    exp = str(paused)
    out = admin.ok("experiment", "set", "name", exp, "renamed").stdout
    assert f"Set name of experiment {exp} to 'renamed'" in out
    out = admin.ok("experiment", "set", "description", exp, "a description").stdout
    assert f"Set description of experiment {exp} to 'a description'" in out
    assert "Added label 'x'" in admin.ok("experiment", "label", "add", exp, "x").stdout
    admin.ok("experiment", "label", "add", exp, "y")
    admin.ok("experiment", "label", "add", exp, "x")  # already there: no change
    assert "Removed label 'y'" in admin.ok("experiment", "label", "remove", exp, "y").stdout
    experiment = _experiment(admin, paused)
    assert experiment["name"] == "renamed"
    assert experiment["description"] == "a description"
    assert experiment["labels"] == ["x"]
    config = _config_of(admin, paused)
    assert (config["name"], config["labels"]) == ("renamed", ["x"])
    listed = admin.ok("experiment", "list").stdout
    assert re.search(rf"^\s*{exp} \|.*\| renamed ", listed, re.MULTILINE), listed
    blank = admin.run("experiment", "set", "name", exp, " ")
    assert blank.returncode != 0
    assert "must not be an empty" in blank.stderr + blank.stdout


def test_set_scheduling_knobs(admin: Det, paused: int) -> None:
    exp = str(paused)
    out = admin.ok("experiment", "set", "max-slots", exp, "1").stdout
    assert f"Set `max_slots` of experiment {exp} to 1" in out
    assert "to 7" in admin.ok("experiment", "set", "priority", exp, "7").stdout
    assert "to 2.5" in admin.ok("experiment", "set", "weight", exp, "2.5").stdout
    resources = _config_of(admin, paused)["resources"]
    assert isinstance(resources, dict)
    assert (resources["max_slots"], resources["priority"], resources["weight"]) == (1, 7, 2.5)
    admin.ok("experiment", "set", "max-slots", exp, "none")
    resources = _config_of(admin, paused)["resources"]
    assert isinstance(resources, dict)
    assert "max_slots" not in resources
    refused = admin.run("experiment", "set", "priority", exp, "100")
    assert refused.returncode != 0
    assert "between 1 and 99" in refused.stderr + refused.stdout


def _busy_slots(cli: Det) -> int:
    slots = json.loads(cli.ok("slot", "list", "--json").stdout)
    return sum(1 for s in slots if s["agent_id"] == AGENT_ID and s["allocation_id"] != "FREE")


def test_max_slots_limits_a_running_experiment(admin: Det, model_dir: Path) -> None:
    """``max-slots`` reaches the scheduler: a two-trial grid that would fill both slots runs one
    trial at a time once its limit is 1."""
    path = model_dir.parent / "limited.yaml"
    path.write_text(
        "name: limited\nentrypoint: python3 trial.py\n"
        "hyperparameters:\n  steps: 10000\n  sleep: 0.05\n"
        "  x:\n    type: categorical\n    vals: [1, 2]\n"
        "searcher:\n  name: grid\n  metric: loss\n  max_concurrent_trials: 2\n"
        "max_restarts: 0\n",
        encoding="utf-8",
    )
    exp_id = _created_id(admin.ok("experiment", "create", str(path), str(model_dir), "--paused"))
    exp = str(exp_id)
    try:
        admin.ok("experiment", "set", "max-slots", exp, "1")
        admin.ok("experiment", "activate", exp)
        deadline = time.monotonic() + WAIT_S
        while _busy_slots(admin) == 0:
            assert time.monotonic() < deadline, "no trial started"
            time.sleep(0.2)
        time.sleep(2.0)  # without the limit the second trial would hold the other slot by now
        assert _busy_slots(admin) == 1
    finally:
        admin.ok("experiment", "kill", exp)
        _wait_state(admin, exp_id, "STATE_CANCELED")


def test_trial_kill_archive_unarchive_delete(admin: Det, model_dir: Path) -> None:
    config = _config(model_dir.parent, "doomed", steps=10_000, sleep=0.05)
    exp_id = _created_id(admin.ok("experiment", "create", config, str(model_dir)))
    exp = str(exp_id)
    trial = str(_trial_id(admin, exp_id))
    deadline = time.monotonic() + WAIT_S
    while "STEP 1" not in admin.ok("trial", "logs", trial).stdout:
        assert time.monotonic() < deadline, "the trial did not start"
        time.sleep(0.2)
    assert f"Killed trial {trial}" in admin.ok("trial", "kill", trial).stdout
    deadline = time.monotonic() + WAIT_S
    state = ""
    while time.monotonic() < deadline:
        described = json.loads(admin.ok("trial", "describe", trial, "--json").stdout)
        state = str(described["trial"]["state"])
        if state in ("STATE_CANCELED", "STATE_ERROR", "STATE_COMPLETED"):
            break
        time.sleep(0.2)
    assert state == "STATE_CANCELED", state
    admin.ok("experiment", "kill", exp)  # the searcher's business: end the experiment too
    _wait_state(admin, exp_id, "STATE_CANCELED", "STATE_COMPLETED", "STATE_ERROR")

    assert f"Archived experiment {exp}" in admin.ok("experiment", "archive", exp).stdout
    assert _experiment(admin, exp_id)["archived"] is True
    edit = admin.run("experiment", "set", "name", exp, "nope")
    assert edit.returncode != 0
    assert "archived" in edit.stderr + edit.stdout
    assert f"Unarchived experiment {exp}" in admin.ok("experiment", "unarchive", exp).stdout
    assert _experiment(admin, exp_id)["archived"] is False

    out = admin.ok("experiment", "delete", exp, "--yes").stdout
    assert f"Deletion of experiment {exp} is in progress" in out
    gone = admin.run("experiment", "describe", exp)
    assert gone.returncode != 0
    assert "not found" in (gone.stderr + gone.stdout).lower()
