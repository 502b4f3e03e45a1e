"""``stalwart template`` and ``stalwart experiment continue`` against a real master and agent."""

from __future__ import annotations

from pathlib import Path

import yaml

from stalwart.client import Client
from tests.cli.conftest import Cli, one_error_line
from tests.client.support import CONFIG


def test_set_list_describe_remove(cli: Cli, tmp_path: Path) -> None:
    settings = {"max_restarts": 3, "labels": ["tpl"]}
    file = tmp_path / "tpl.yaml"
    file.write_text(yaml.safe_dump(settings))
    assert cli("template", "set", "cli-tpl", str(file)).out.strip() == "Set template cli-tpl."
    listed = cli("template", "list", "-d")
    assert listed.code == 0
    assert "cli-tpl" in listed.out
    assert "max_restarts: 3" in listed.out
    assert yaml.safe_load(cli("template", "describe", "cli-tpl").out) == settings

    file.write_text("max_restarts: 1\n")
    cli("template", "set", "cli-tpl", str(file))
    assert yaml.safe_load(cli("template", "describe", "cli-tpl").out) == {"max_restarts": 1}

    assert cli("template", "remove", "cli-tpl").code == 0
    gone = cli("template", "describe", "cli-tpl")
    assert gone.code == 1
    assert one_error_line(gone.err) == "error: template 'cli-tpl' not found"


def test_experiment_continue(cli: Cli, admin: Client, model_dir: Path) -> None:
    exp = admin.create_experiment(CONFIG, model_dir)
    assert exp.wait(timeout=90, interval=0.1) == "COMPLETED"
    done = cli("experiment", "continue", str(exp.id), "--config", "max_restarts=2")
    assert done.code == 0, done.err
    assert done.out.strip() == f"Continued experiment {exp.id}"
    assert exp.wait(timeout=90, interval=0.1) == "COMPLETED"
    assert exp.config["max_restarts"] == 2
    assert len(exp.trials()) == 1

    refused = cli("e", "continue", str(exp.id), "--config", "hyperparameters.x=0.9")
    assert refused.code == 1
    assert "cannot change 'hyperparameters'" in one_error_line(refused.err)
