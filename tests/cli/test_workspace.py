"""``stalwart workspace``, ``stalwart project`` and ``stalwart experiment move`` against a real
master."""

from __future__ import annotations

import json
from pathlib import Path

from stalwart.client import Client
from tests.cli.conftest import Cli, one_error_line
from tests.client.support import CONFIG


def test_workspace_and_project_commands(cli: Cli, admin: Client, model_dir: Path) -> None:
    created = cli("workspace", "create", "cli-team", "--default-aux-pool", "aux", "--json")
    assert created.code == 0, created.err
    made = json.loads(created.out)[0]
    assert (made["name"], made["defaultAuxPool"], made["pinned"]) == ("cli-team", "aux", True)
    assert "cli-team" in cli("workspace", "list").out
    storage = json.dumps({"type": "shared_fs", "host_path": "/tmp", "storage_path": "cli"})
    edited = cli("workspace", "edit", "cli-team", "--checkpoint-storage", storage)
    assert edited.code == 0, edited.err
    assert "Checkpoint storage" in cli("workspace", "describe", "cli-team").out
    for verb, done in (
        ("unpin", "Unpinned"),
        ("pin", "Pinned"),
        ("archive", "Archived"),
        ("unarchive", "Unarchived"),
    ):
        result = cli("workspace", verb, "cli-team")
        assert result.out.strip() == f"{done} workspace cli-team.", result.err
    project = cli("project", "create", "cli-team", "cli-proj", "--key", "clp", "--json")
    assert json.loads(project.out)[0]["key"] == "CLP"
    project_id = json.loads(project.out)[0]["id"]
    assert "CLP" in cli("workspace", "list-projects", "cli-team").out
    assert cli("project", "edit", "cli-team", "cli-proj", "--description", "d").code == 0
    assert cli("project", "add-note", "cli-team", "cli-proj", "plan", "train").code == 0
    described = cli("project", "describe", "cli-team", "cli-proj").out
    assert "# plan" in described
    assert "train" in described
    assert cli("project", "archive", "cli-team", "cli-proj").code == 0
    assert cli("project", "unarchive", "cli-team", "cli-proj").code == 0

    config = model_dir.parent / "cli-move.yaml"
    config.write_text(CONFIG)
    made_exp = cli(
        "experiment",
        "create",
        str(config),
        str(model_dir),
        "--paused",
        "--project-id",
        str(project_id),
    )
    assert made_exp.code == 0, made_exp.err
    exp_id = int(made_exp.out.split()[2])
    assert admin.get_experiment(exp_id).data.project_id == project_id
    refused = cli("workspace", "delete", "cli-team", "--yes")
    assert refused.code == 1
    assert "holds 1 experiment" in one_error_line(refused.err)
    moved = cli("experiment", "move", str(exp_id), "Uncategorized", "Uncategorized")
    assert moved.out.strip() == f'Moved experiment {exp_id} to project "Uncategorized".'
    assert admin.get_experiment(exp_id).data.project_id == 1
    assert cli("project", "delete", "cli-team", "cli-proj", "--yes").code == 0
    deleted = cli("workspace", "delete", "cli-team", "--yes")
    assert deleted.out.strip() == "Deleted workspace cli-team.", deleted.err
    missing = cli("workspace", "describe", "cli-team")
    assert "not found" in one_error_line(missing.err)
