"""Config templates with the official ``det`` CLI and SDK (determined 0.38.1), unchanged:
``det template set/create/set-value/list/describe/remove``, ``det e create --template``,
``det cmd run/notebook start/shell start --template`` and the SDK's
``client.create_experiment(..., template=...)``; and the refusals (a viewer cannot set a
template; an unknown template is not found).

No agent: experiments are created paused and tasks only queue; what is checked is the config the
master stored.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from tests.compat.conftest import Det, MasterProcess, describe

pytestmark = pytest.mark.compat

BASE = {
    "description": "from the template",
    "max_restarts": 7,
    "labels": ["templated"],
    "environment": {"environment_variables": ["FROM_TEMPLATE=1"]},
}
EXPERIMENT = """\
name: templated
entrypoint: python3 train.py
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
"""


def _admin_headers(master: MasterProcess) -> dict[str, str]:
    resp = httpx.post(
        f"{master.url}/api/v1/auth/login",
        json={"username": "admin", "password": "", "isHashed": True},
        timeout=10,
    )
    resp.raise_for_status()
    return {"Authorization": f"Bearer {resp.json()['token']}"}


def _write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def _model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "train.py").write_text("print('hi')\n")
    return model


def _set_role(master: MasterProcess, username: str, role: str) -> None:
    headers = _admin_headers(master)
    user = httpx.get(
        f"{master.url}/api/v1/users/{username}/by-username", headers=headers, timeout=10
    ).json()["user"]
    resp = httpx.put(
        f"{master.url}/api/v1/workspaces/1/roles/users/{user['id']}",
        json={"role": role},
        headers=headers,
        timeout=10,
    )
    assert resp.status_code == 200, resp.text


def test_set_list_describe_change_and_remove(det: Det, tmp_path: Path) -> None:
    det.login("admin")
    base = _write(tmp_path / "base.yaml", BASE)
    done = det.ok("template", "set", "crud", str(base))
    assert "Set template crud" in done.stdout

    listed = det.ok("template", "list").stdout
    assert "crud" in listed
    assert "Uncategorized" in listed  # the workspace's name, from det's own lookup
    detailed = det.ok("template", "list", "-d").stdout
    assert "FROM_TEMPLATE=1" in detailed
    assert yaml.safe_load(det.ok("template", "describe", "crud").stdout) == BASE

    # set again: det finds it and replaces its config (PATCH)
    smaller = _write(tmp_path / "smaller.yaml", {"max_restarts": 2})
    det.ok("template", "set", "crud", str(smaller))
    assert yaml.safe_load(det.ok("template", "describe", "crud").stdout) == {"max_restarts": 2}
    det.ok("template", "set-value", "config", "crud", str(base))
    assert yaml.safe_load(det.ok("template", "describe", "crud").stdout) == BASE

    created = det.ok("template", "create", "in-ws", str(smaller), "-w", "Uncategorized")
    assert "Created template in-ws" in created.stdout
    again = det.run("template", "create", "in-ws", str(smaller))
    assert again.returncode != 0
    assert "already exists" in again.stdout + again.stderr

    removed = det.ok("template", "remove", "crud")
    assert "Removed template crud" in removed.stdout
    det.ok("template", "rm", "in-ws")
    assert "crud" not in det.ok("template", "list").stdout

    unknown = det.run("template", "describe", "crud")
    assert unknown.returncode != 0, describe(unknown)
    assert "template 'crud' not found" in unknown.stdout + unknown.stderr


def test_a_viewer_reads_templates_but_cannot_set_one(
    det: Det, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    det.login("admin")
    det.ok("user", "create", "vera", "--password", "Viewer-pass1")
    _set_role(stalwart_master, "vera", "viewer")
    base = _write(tmp_path / "base.yaml", BASE)
    det.ok("template", "set", "shared", str(base))

    det.login("vera", "Viewer-pass1")
    assert yaml.safe_load(det.ok("template", "describe", "shared").stdout) == BASE
    assert "shared" in det.ok("template", "list").stdout
    refused = det.run("template", "set", "vera-tpl", str(base))
    assert refused.returncode != 0, describe(refused)
    output = refused.stdout + refused.stderr
    assert "needs an editor role" in output
    changed = det.run("template", "set", "shared", str(_write(tmp_path / "x.yaml", {"a": 1})))
    assert changed.returncode != 0
    removed = det.run("template", "remove", "shared")
    assert removed.returncode != 0
    det.login("admin")
    assert yaml.safe_load(det.ok("template", "describe", "shared").stdout) == BASE


def test_experiments_take_the_template_under_their_config(
    det: Det, det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    det.login("admin")
    det.ok("template", "set", "exp-base", str(_write(tmp_path / "base.yaml", BASE)))
    config = _write(tmp_path / "exp.yaml", EXPERIMENT + "labels: [mine]\n")
    model = _model_dir(tmp_path)
    done = det.ok(
        "experiment", "create", "--paused", "--template", "exp-base", str(config), str(model)
    )
    exp_id = int(done.stdout.split("Created experiment ")[1].split()[0])
    (described,) = json.loads(det.ok("experiment", "describe", str(exp_id), "--json").stdout)
    stored = described["config"]
    assert stored["max_restarts"] == 7
    assert stored["description"] == "from the template"
    assert stored["labels"] == ["mine"]  # the experiment's own setting wins
    assert "FROM_TEMPLATE=1" in stored["environment"]["environment_variables"]["cpu"]

    unknown = det.run("experiment", "create", "--template", "nope", str(config), str(model))
    assert unknown.returncode != 0
    assert "template 'nope' not found" in unknown.stdout + unknown.stderr

    script = (
        "import sys\n"
        "from determined.experimental import client\n"
        "client.login(master=sys.argv[1], user='admin', password='')\n"
        "exp = client.create_experiment(sys.argv[2], sys.argv[3], template='exp-base')\n"
        "print('SDK_EXPERIMENT', exp.id)\n"
    )
    sdk = subprocess.run(
        [
            str(det_venv / "bin" / "python"),
            "-c",
            script,
            stalwart_master.url,
            str(config),
            str(model),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=dict(det.env),
        stdin=subprocess.DEVNULL,
    )
    assert sdk.returncode == 0, describe(sdk)
    sdk_id = int(sdk.stdout.split("SDK_EXPERIMENT ")[1].split()[0])
    det.ok("experiment", "kill", str(sdk_id))
    (described,) = json.loads(det.ok("experiment", "describe", str(sdk_id), "--json").stdout)
    assert described["config"]["max_restarts"] == 7


def test_tasks_take_the_template(det: Det, tmp_path: Path) -> None:
    det.login("admin")
    template = {
        "description": "templated task",
        "resources": {"slots": 0},
        "environment": {"environment_variables": ["FROM_TEMPLATE=1"]},
        "searcher": {"name": "single", "metric": "loss"},  # an experiment's: tasks skip it
    }
    det.ok("template", "set", "task-base", str(_write(tmp_path / "task.yaml", template)))

    cmd_id = det.ok("cmd", "run", "-d", "--template", "task-base", "true").stdout.strip()
    cmd_config = yaml.safe_load(det.ok("cmd", "config", cmd_id).stdout)
    assert cmd_config["description"] == "templated task"
    assert cmd_config["resources"]["slots"] == 0
    assert "FROM_TEMPLATE=1" in cmd_config["environment"]["environment_variables"]["cpu"]
    det.ok("cmd", "kill", cmd_id)

    preview = det.ok("notebook", "start", "--preview", "--template", "task-base").stdout
    assert yaml.safe_load(preview)["description"] == "templated task"

    shell_id = det.ok("shell", "start", "-d", "--template", "task-base").stdout.strip()
    assert yaml.safe_load(det.ok("shell", "config", shell_id).stdout)["resources"]["slots"] == 0
    det.ok("shell", "kill", shell_id)

    unknown = det.run("cmd", "run", "-d", "--template", "nope", "true")
    assert unknown.returncode != 0
    assert "template 'nope' not found" in unknown.stdout + unknown.stderr
