"""The model registry with the official 0.38.1 client, on Stalwart: ``det model ...``, the SDK's
``Model`` / ``ModelVersion``, the refusals, and a registered checkpoint outliving checkpoint GC.

One real master and one two-slot agent serve the module (the fixtures of
``test_det_workflows``). The experiment runs ``workflows/registry_trial.py``: checkpoints at
steps 2, 4 and 6, validation only at step 6, so GC's default policy (latest and best of each
trial) keeps only step 6. The trial waits after its first checkpoint until the test has
registered that checkpoint with ``det model register-version``; after the run, GC deletes step
4 and keeps the registered step 2, files and all.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from stalwart.master.db.tables import Project, Workspace
from tests.compat.conftest import Det, MasterProcess, describe, det_at, sdk_result
from tests.compat.test_det_workflows import (
    WAIT_S,
    WORKFLOWS,
    _created_id,
    _wait_state,
    admin,
    agent,
)
from tests.master.test_allocations_api import login_headers

__all__ = ["admin", "agent"]  # module-scoped fixtures, shared by import

pytestmark = pytest.mark.compat

GC_WAIT_S = 60.0


@dataclass
class Trained:
    """The registry experiment after its run and its checkpoint GC."""

    exp_id: int
    registered: str
    """Step 2: registered to model ``keeper`` while the trial ran."""
    sibling: str
    """Step 4: neither latest, best nor registered: collected."""
    latest: str
    """Step 6: kept by the policy."""
    registered_out: str
    """What ``det model register-version`` printed."""


@pytest.fixture(scope="module")
def api(stalwart_master: MasterProcess) -> Iterator[httpx.Client]:
    """Plain REST as admin (what the official client cannot do: workspace roles)."""
    with httpx.Client(base_url=stalwart_master.url, timeout=30) as http:
        http.headers.update(login_headers(http))
        yield http


def _checkpoints(api: httpx.Client, exp_id: int) -> dict[int, dict[str, Any]]:
    """The experiment's checkpoints by steps completed."""
    resp = api.get(f"/api/v1/experiments/{exp_id}/checkpoints")
    assert resp.status_code == 200, resp.text
    return {int(c["metadata"]["steps_completed"]): c for c in resp.json()["checkpoints"]}


def _until(what: str, check: Any, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout:.0f} s")


def _workspace(master: MasterProcess, name: str) -> int:
    """A workspace with one project, written to the master's database (``det workspace
    create`` is another part of the work); its id."""
    engine = create_engine(f"sqlite:///{master.home / 'master.db'}")
    try:
        with Session(engine) as session:
            workspace = Workspace(name=name)
            session.add(workspace)
            session.flush()
            session.add(Project(name=f"{name}-project", workspace_id=workspace.id))
            session.commit()
            return workspace.id
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def trained(admin: Det, api: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> Trained:
    work = tmp_path_factory.mktemp("registry")
    model_dir = work / "model"
    model_dir.mkdir()
    shutil.copy(WORKFLOWS / "registry_trial.py", model_dir / "registry_trial.py")
    gate = work / "gate"
    config = work / "registry.yaml"
    config.write_text(
        "name: registry\n"
        "entrypoint: python3 registry_trial.py\n"
        f"hyperparameters:\n  steps: 6\n  gate: {json.dumps(str(gate))}\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n"
        "max_restarts: 0\n",
        encoding="utf-8",
    )
    admin.ok("model", "create", "keeper", "--description", "kept forever")
    exp_id = _created_id(admin.ok("experiment", "create", str(config), str(model_dir)))
    first = _until("first checkpoint", lambda: _checkpoints(api, exp_id).get(2))
    registered = admin.ok("model", "register-version", "keeper", first["uuid"])
    gate.write_text("open")
    _wait_state(admin, exp_id, "STATE_COMPLETED")

    def collected() -> dict[int, dict[str, Any]] | None:
        found = _checkpoints(api, exp_id)
        return found if found.get(4, {}).get("state") == "STATE_DELETED" else None

    done = _until("checkpoint GC", collected, timeout=GC_WAIT_S)
    return Trained(
        exp_id=exp_id,
        registered=first["uuid"],
        sibling=done[4]["uuid"],
        latest=done[6]["uuid"],
        registered_out=registered.stdout,
    )


def test_a_registered_checkpoint_survives_gc(
    trained: Trained, api: httpx.Client, stalwart_master: MasterProcess
) -> None:
    states = {steps: c["state"] for steps, c in _checkpoints(api, trained.exp_id).items()}
    assert states == {2: "STATE_COMPLETED", 4: "STATE_DELETED", 6: "STATE_COMPLETED"}
    storage = stalwart_master.home / "checkpoints"  # the master's default shared_fs storage
    kept = json.loads((storage / trained.registered / "state.json").read_text())
    assert kept == {"step": 2}
    assert (storage / trained.latest / "state.json").exists()
    assert not (storage / trained.sibling).exists()
    assert trained.registered in trained.registered_out  # the version table of the new version


def test_model_commands(
    admin: Det, trained: Trained, api: httpx.Client, stalwart_master: MasterProcess
) -> None:
    other = _workspace(stalwart_master, "models-elsewhere")
    created = admin.ok(
        "model", "create", "cli-model", "-w", "Uncategorized", "--description", "from det"
    )
    assert "cli-model" in created.stdout
    assert "from det" in created.stdout
    as_json = json.loads(admin.ok("model", "create", "cli-json", "--json").stdout)
    assert as_json["name"] == "cli-json"
    assert as_json["archived"] is False

    listed = admin.ok("model", "list").stdout
    assert "cli-model" in listed
    assert "keeper" in listed
    names = [m["name"] for m in json.loads(admin.ok("model", "list", "--json").stdout)]
    assert {"cli-model", "cli-json", "keeper"} <= set(names)
    by_name = json.loads(
        admin.ok("model", "list", "--sort-by", "name", "--order-by", "desc", "--json").stdout
    )
    assert [m["name"] for m in by_name] == sorted((m["name"] for m in by_name), reverse=True)

    described = admin.ok("model", "describe", "keeper").stdout
    assert "kept forever" in described
    assert trained.registered in described  # the latest version's checkpoint
    keeper = json.loads(admin.ok("model", "describe", "keeper", "--json").stdout)
    assert (keeper["name"], keeper["description"]) == ("keeper", "kept forever")

    versions = admin.ok("model", "list-versions", "keeper").stdout
    assert trained.registered in versions
    raw = json.loads(admin.ok("model", "list-versions", "keeper", "--json").stdout)
    assert [v["checkpoint"]["uuid"] for v in raw["modelVersions"]] == [trained.registered]

    posted = json.loads(
        admin.ok("model", "register-version", "cli-model", trained.latest, "--json").stdout
    )
    assert posted["modelVersion"]["version"] == 1
    assert posted["modelVersion"]["checkpoint"]["uuid"] == trained.latest
    second = admin.ok("model", "describe", "cli-model", "--version", "1").stdout
    assert trained.latest in second

    admin.ok("model", "move", "cli-model", "-w", "models-elsewhere")
    moved = api.get("/api/v1/models/cli-model").json()["model"]
    assert moved["workspaceId"] == other
    assert moved["numVersions"] == 1
    only_there = json.loads(admin.ok("model", "list", "-w", "models-elsewhere", "--json").stdout)
    assert [m["name"] for m in only_there] == ["cli-model"]

    admin.ok("model", "delete", "cli-json")
    gone = admin.run("model", "describe", "cli-json")
    assert gone.returncode != 0
    assert "not found" in gone.stdout + gone.stderr


def test_model_command_refusals(admin: Det, trained: Trained) -> None:
    taken = admin.run("model", "create", "keeper")
    assert taken.returncode != 0
    assert "already exists" in taken.stdout + taken.stderr, describe(taken)
    numeric = admin.run("model", "create", "12345")
    assert numeric.returncode != 0
    assert "only numbers" in numeric.stdout + numeric.stderr, describe(numeric)
    unknown = admin.run("model", "describe", "no-such-model")
    assert unknown.returncode != 0
    assert "not found" in unknown.stdout + unknown.stderr, describe(unknown)
    deleted = admin.run("model", "register-version", "keeper", trained.sibling)
    assert deleted.returncode != 0
    assert "COMPLETED state" in deleted.stdout + deleted.stderr, describe(deleted)
    missing = admin.run("model", "register-version", "keeper", "no-such-checkpoint")
    assert missing.returncode != 0
    assert "not found" in missing.stdout + missing.stderr, describe(missing)


def test_deleting_a_registered_checkpoint_is_refused(
    admin: Det, trained: Trained, api: httpx.Client, stalwart_master: MasterProcess
) -> None:
    refused = admin.run("checkpoint", "delete", trained.registered, "--yes")
    assert refused.returncode != 0
    text = refused.stdout + refused.stderr
    assert "registered to keeper" in text, describe(refused)
    assert "model registry" in text
    experiment = admin.run("experiment", "delete", str(trained.exp_id), "--yes")
    assert experiment.returncode != 0
    assert "registered as model versions" in experiment.stdout + experiment.stderr
    states = {steps: c["state"] for steps, c in _checkpoints(api, trained.exp_id).items()}
    assert states[2] == "STATE_COMPLETED"
    assert (stalwart_master.home / "checkpoints" / trained.registered / "state.json").exists()


def test_the_sdk(
    admin: Det, trained: Trained, det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    workspace = _workspace(stalwart_master, "sdk-elsewhere")
    result = sdk_result(
        det_venv,
        admin,
        WORKFLOWS / "registry_sdk.py",
        trained.latest,
        "sdk-elsewhere",
        str(tmp_path),
    )
    assert result["created"]["workspace"] == 1
    assert result["same"] is True
    assert result["listed"] == ["sdk-model"]
    assert result["edited"] == [{"b": 2}, ["y", "z"], "second"]
    assert {"y", "z"} <= set(result["labels"])
    version = result["version"]
    assert (version["number"], version["name"], version["notes"]) == (
        1,
        "best",
        "how it was trained",
    )
    assert version["uuid"] == trained.latest
    assert version["model_id"] == result["created"]["id"]
    assert result["versions"] == [1]
    assert result["downloaded"] == {"step": 6}
    assert "archived" in result["archived_edit"]
    assert result["moved_to"] == workspace
    assert result["after_delete"] == [1]  # version 2 was deleted
    assert result["deleted"] is True


def test_workspace_roles_hide_and_guard_models(
    admin: Det,
    trained: Trained,
    api: httpx.Client,
    det_venv: Path,
    stalwart_master: MasterProcess,
    tmp_path: Path,
) -> None:
    team = _workspace(stalwart_master, "team")
    resp = api.put(f"/api/v1/workspaces/{team}/roles/default", json={"role": "none"})
    assert resp.status_code == 200, resp.text
    users: dict[str, Det] = {}
    for name in ("vera", "bob"):
        admin.ok("user", "create", name, "--password", "Long-password-1")
        users[name] = det_at(det_venv, stalwart_master, tmp_path / name)
        users[name].login(name, "Long-password-1")
    vera_id = next(
        u["id"] for u in api.get("/api/v1/users").json()["users"] if u["username"] == "vera"
    )
    resp = api.put(f"/api/v1/workspaces/{team}/roles/users/{vera_id}", json={"role": "viewer"})
    assert resp.status_code == 200, resp.text
    admin.ok("model", "create", "team-model", "-w", "team")
    admin.ok("model", "register-version", "team-model", trained.latest)

    # bob has no role in team: the model is not listed and not found
    bob, vera = users["bob"], users["vera"]
    names = [m["name"] for m in json.loads(bob.ok("model", "list", "--json").stdout)]
    assert "team-model" not in names
    assert "keeper" in names  # Uncategorized: everyone may read
    hidden = bob.run("model", "describe", "team-model")
    assert hidden.returncode != 0
    assert "not found" in hidden.stdout + hidden.stderr, describe(hidden)

    # vera, a viewer, reads it but may not create or register in team
    names = [m["name"] for m in json.loads(vera.ok("model", "list", "--json").stdout)]
    assert "team-model" in names
    assert trained.latest in vera.ok("model", "list-versions", "team-model").stdout
    refused = vera.run("model", "create", "veras", "-w", "team")
    assert refused.returncode != 0
    assert "cannot create models in workspace 'team'" in refused.stdout + refused.stderr
    register = vera.run("model", "register-version", "team-model", trained.latest)
    assert register.returncode != 0
    assert "viewer" in register.stdout + register.stderr, describe(register)
