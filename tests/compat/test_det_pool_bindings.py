"""The official 0.38.1 CLI's ``det resource-pool bindings`` against a Stalwart master with a
second resource pool: binding it to a workspace, listing, an experiment and a command of another
workspace refused from it with a message naming the pool and its workspace, replacing and
removing bindings, and the refusals (a default pool, a non-admin). No agent: nothing runs.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.compat.conftest import (
    Det,
    MasterProcess,
    _start_master,
    _stop,
    describe,
    det_at,
    logged_in_admin,
)
from tests.compat.test_det_workflows import WORKFLOWS, _created_id

pytestmark = pytest.mark.compat

MASTER_CONFIG = "resource_pools:\n  - pool_name: second\n    description: the team's pool\n"
PASSWORD = "Long-password-1"
REFUSED = "resource pool 'second' is bound to workspace 'team'"


@pytest.fixture(scope="module")
def stalwart_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """A master whose config names a second pool besides ``default``, and workspace ``team``
    (written into its database: creating workspaces is another command's business)."""
    workdir = tmp_path_factory.mktemp("master")
    (workdir / "master.yaml").write_text(MASTER_CONFIG)
    master = _start_master(workdir, ["--config", str(workdir / "master.yaml")])
    try:
        with sqlite3.connect(master.home / "master.db") as db:
            db.execute("INSERT INTO workspaces (name, archived, immutable) VALUES ('team', 0, 0)")
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


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tmp_path_factory.mktemp("model")
    (model / "trial.py").write_text((WORKFLOWS / "trial.py").read_text())
    return model


def _config(directory: Path, pool: str) -> str:
    path = directory / f"on-{pool}.yaml"
    path.write_text(
        f"name: on-{pool}\n"
        "entrypoint: python3 trial.py\n"
        "hyperparameters:\n  steps: 1\n  sleep: 0\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n"
        f"resources:\n  resource_pool: {pool}\n",
        encoding="utf-8",
    )
    return str(path)


def _bound(cli: Det, pool: str) -> str:
    listed = cli.ok("resource-pool", "bindings", "list-workspaces", pool).stdout
    rows = [line for line in listed.splitlines() if line.strip().startswith(pool)]
    assert len(rows) == 1, listed
    return rows[0].split("|", 1)[1].strip() if "|" in rows[0] else rows[0][len(pool) :].strip()


def _create(cli: Det, model_dir: Path, pool: str) -> int:
    config = _config(model_dir.parent, pool)
    return _created_id(cli.ok("experiment", "create", config, str(model_dir), "--paused"))


def test_a_bound_pool_serves_only_its_workspaces(admin: Det, model_dir: Path) -> None:
    assert _bound(admin, "second") == ""
    added = admin.ok("resource-pool", "bindings", "add", "second", "team")
    assert 'added bindings between the resource pool "second"' in added.stdout
    assert _bound(admin, "second") == "team"

    refused = admin.run(
        "experiment", "create", _config(model_dir.parent, "second"), str(model_dir), "--paused"
    )
    assert refused.returncode != 0
    message = refused.stdout + refused.stderr
    assert REFUSED in message, describe(refused)
    assert "this experiment is in workspace 'Uncategorized'" in message

    command = admin.run("cmd", "run", "--config", "resources.resource_pool=second", "true")
    assert command.returncode != 0
    assert REFUSED in command.stdout + command.stderr, describe(command)
    in_team = admin.ok(
        "cmd", "run", "-d", "-w", "team", "--config", "resources.resource_pool=second", "true"
    )
    task_id = in_team.stdout.strip().splitlines()[-1]
    admin.ok("cmd", "kill", task_id)

    # the default pool still serves everyone
    admin.ok("experiment", "kill", str(_create(admin, model_dir, "default")))


def test_replace_and_remove_bindings(admin: Det, model_dir: Path) -> None:
    admin.ok("resource-pool", "bindings", "add", "second", "team")
    replaced = admin.ok("resource-pool", "bindings", "replace", "second", "Uncategorized")
    assert "replaced bindings" in replaced.stdout
    assert _bound(admin, "second") == "Uncategorized"
    admin.ok("experiment", "kill", str(_create(admin, model_dir, "second")))

    admin.ok("resource-pool", "bindings", "replace", "second", "team", "Uncategorized")
    assert _bound(admin, "second") == "Uncategorized, team"
    removed = admin.ok("resource-pool", "bindings", "remove", "second", "Uncategorized", "team")
    assert "removed bindings" in removed.stdout
    assert _bound(admin, "second") == ""  # unbound: everyone may use it again
    admin.ok("experiment", "kill", str(_create(admin, model_dir, "second")))


def test_binding_refusals(
    admin: Det, det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    default = admin.run("resource-pool", "bindings", "add", "default", "team")
    assert default.returncode != 0
    assert "is a default pool" in default.stdout + default.stderr, describe(default)
    unknown = admin.run("resource-pool", "bindings", "add", "nowhere", "team")
    assert unknown.returncode != 0
    assert "resource pool 'nowhere' not found" in unknown.stdout + unknown.stderr
    no_workspace = admin.run("resource-pool", "bindings", "add", "second", "atlantis")
    assert no_workspace.returncode != 0
    assert "workspace 'atlantis' not found" in no_workspace.stdout + no_workspace.stderr

    carol = det_at(det_venv, stalwart_master, tmp_path / "carol")
    carol.login("carol", PASSWORD)
    for verb in ("add", "replace", "remove"):
        refused = carol.run("resource-pool", "bindings", verb, "second", "Uncategorized")
        assert refused.returncode != 0
        assert "only a cluster admin can" in refused.stdout + refused.stderr, describe(refused)
    assert _bound(carol, "second") == ""  # anyone may look


def test_unbound_pools_leave_the_bound_one_out(admin: Det) -> None:
    """``GET /resource-pools?unbound=true`` (what Determined's web UI reads) lists only pools
    without bindings."""
    stored = json.loads((admin.config_dir / "auth.json").read_text())
    entry = stored["masters"][admin.master.url]
    headers = {"Authorization": f"Bearer {entry['tokens'][entry['active_user']]}"}

    def unbound() -> set[str]:
        resp = httpx.get(
            f"{admin.master.url}/api/v1/resource-pools",
            params={"unbound": "true"},
            headers=headers,
            timeout=30,
        )
        resp.raise_for_status()
        return {p["name"] for p in resp.json()["resourcePools"]}

    assert unbound() == {"default", "second"}
    admin.ok("resource-pool", "bindings", "add", "second", "team")
    try:
        assert unbound() == {"default"}
    finally:
        admin.ok("resource-pool", "bindings", "remove", "second", "team")
    assert unbound() == {"default", "second"}
