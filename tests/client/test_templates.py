"""The SDK's config templates and ``Experiment.continue_`` against a real master and agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.client import Client
from stalwart.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from tests.client.support import CONFIG


def test_templates(admin: Client, model_dir: Path, tmp_path: Path) -> None:
    made = admin.set_template("sdk-tpl", {"max_restarts": 4, "description": "sdk"})
    assert (made.name, made.workspace_id) == ("sdk-tpl", 1)
    file = tmp_path / "tpl.yaml"
    file.write_text("max_restarts: 6\ndescription: sdk\n")
    assert admin.set_template("sdk-tpl", file).config == {"max_restarts": 6, "description": "sdk"}
    assert admin.get_template("sdk-tpl").config["max_restarts"] == 6
    assert [t.name for t in admin.list_templates("SDK-")] == ["sdk-tpl"]

    exp = admin.create_experiment(CONFIG, model_dir, activate=False, template="sdk-tpl")
    assert exp.config["max_restarts"] == 6
    assert exp.config["description"] == "sdk"
    exp.kill()

    with pytest.raises(InvalidArgumentError, match="must be a mapping"):
        admin.set_template("bad", "- a\n- b\n")
    admin.remove_template("sdk-tpl")
    with pytest.raises(NotFoundError, match="template 'sdk-tpl' not found"):
        admin.get_template("sdk-tpl")
    with pytest.raises(NotFoundError):
        admin.create_experiment(CONFIG, model_dir, activate=False, template="sdk-tpl")


def test_continue(admin: Client, model_dir: Path) -> None:
    exp = admin.create_experiment(CONFIG, model_dir)
    with pytest.raises(FailedPreconditionError, match="only a finished"):
        exp.continue_()
    assert exp.wait(timeout=90, interval=0.1) == "COMPLETED"
    (trial,) = exp.trials()
    continued = admin.continue_experiment(exp.id, {"max_restarts": 3})
    assert continued.id == exp.id
    assert exp.wait(timeout=90, interval=0.1) == "COMPLETED"
    (again,) = exp.trials()
    assert again.id == trial.id
    assert exp.config["max_restarts"] == 3
