"""Workspaces and projects with the official 0.38.1 client (``det`` and the SDK), on Stalwart.

Commands proven here with the unmodified client: ``workspace create|list|describe|edit|archive|
unarchive|list-projects|delete``, ``project create|list|describe|edit|archive|unarchive|
list-experiments|delete``, ``experiment create --project_id`` and ``experiment move``; the SDK's
``create_workspace``, ``get_workspace``, ``list_workspaces``, ``delete_workspace``,
``Workspace.create_project|list_projects|delete_project``, the ``Project`` setters and notes,
``Experiment.move_to_project``, and the pin bindings. Refusals: a user without a role in a
workspace sees neither it nor its projects and cannot create or move experiments there; a
workspace (or project) holding experiments is not deleted. A workspace's checkpoint storage
receives the checkpoints of an experiment run there, its default pools are applied, and a task
of a workspace with an agent user runs as that user (root agent only). One real master and one
two-slot agent serve the module (the fixtures of ``test_det_workflows``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.compat.conftest import Det, describe, det_at, sdk_result
from tests.compat.test_det_workflows import (
    UUID,
    WAIT_S,
    WORKFLOWS,
    _config,
    _created_id,
    _experiment,
    _wait_state,
    admin,
    agent,
    model_dir,
)

__all__ = ["admin", "agent", "model_dir"]  # module-scoped fixtures, shared by import

pytestmark = pytest.mark.compat


def _token(cli: Det) -> str:
    stored = json.loads((cli.config_dir / "auth.json").read_text())
    entry = stored["masters"][cli.master.url]
    return str(entry["tokens"][entry["active_user"]])


def _api(cli: Det, method: str, path: str, body: Any = None) -> Any:
    resp = httpx.request(
        method,
        f"{cli.master.url}/api/v1{path}",
        json=body,
        headers={"Authorization": f"Bearer {_token(cli)}"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def _workspace(cli: Det, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(cli.ok("workspace", "describe", name, "--json").stdout)
    return found


def _project(cli: Det, workspace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        cli.ok("project", "describe", workspace, name, "--json").stdout
    )
    return found


def _paused(cli: Det, model_dir: Path, project_id: int, name: str, *extra: str) -> int:
    config = _config(model_dir.parent, name, steps=2, sleep=0.0)
    done = cli.ok(
        "experiment",
        "create",
        config,
        str(model_dir),
        "--paused",
        "--project_id",
        str(project_id),
        *extra,
    )
    return _created_id(done)


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode != 0, describe(done)
    text = done.stdout + done.stderr
    for word in words:
        assert word in text, describe(done)


def test_workspace_commands(admin: Det) -> None:
    made = json.loads(admin.ok("workspace", "create", "team", "--json").stdout)
    assert (made["name"], made["username"], made["pinned"]) == ("team", "admin", True)
    table = admin.ok("workspace", "create", "team-b").stdout
    assert "team-b" in table
    assert "Default Compute Pool" in table
    listed = admin.ok("workspace", "list").stdout
    assert "Uncategorized" in listed
    assert "team-b" in listed
    by_name = json.loads(admin.ok("workspace", "list", "--sort-by", "name", "--json").stdout)
    assert [w["name"] for w in by_name] == sorted((w["name"] for w in by_name), key=str.lower)
    assert _workspace(admin, "team")["id"] == made["id"]
    edited = json.loads(
        admin.ok("workspace", "edit", "team-b", "--name", "team-c", "--json").stdout
    )
    assert edited["name"] == "team-c"
    out = admin.ok("workspace", "archive", "team-c").stdout
    assert "Successfully archived workspace team-c." in out
    assert _workspace(admin, "team-c")["archived"] is True
    _refused(admin.run("project", "create", "team-c", "late"), "archived")
    admin.ok("workspace", "unarchive", "team-c")
    assert _workspace(admin, "team-c")["archived"] is False
    _refused(admin.run("workspace", "edit", "Uncategorized", "--name", "x"), "built in")
    _refused(admin.run("workspace", "create", "TEAM"), "already in use")
    out = admin.ok("workspace", "delete", "team-c", "--yes").stdout
    assert "Successfully deleted workspace team-c." in out
    _refused(admin.run("workspace", "describe", "team-c"), "not found")


def test_project_commands(admin: Det, model_dir: Path) -> None:
    admin.ok("workspace", "create", "proj-space")
    made = json.loads(
        admin.ok(
            "project",
            "create",
            "proj-space",
            "vision",
            "--description",
            "cats",
            "--key",
            "vis",
            "--json",
        ).stdout
    )
    assert (made["name"], made["key"], made["description"]) == ("vision", "VIS", "cats")
    auto = json.loads(admin.ok("project", "create", "proj-space", "nlp", "--json").stdout)
    assert auto["key"].startswith("NLP")
    _refused(admin.run("project", "create", "proj-space", "other", "--key", "VIS"), "in use")
    listed = admin.ok("workspace", "list-projects", "proj-space").stdout
    assert "vision" in listed
    assert "VIS" in listed
    assert "vision" in admin.ok("project", "list", "proj-space").stdout
    edited = json.loads(
        admin.ok(
            "project",
            "edit",
            "proj-space",
            "vision",
            "--new_name",
            "images",
            "--description",
            "dogs",
            "--key",
            "img",
            "--json",
        ).stdout
    )
    assert (edited["name"], edited["description"], edited["key"]) == ("images", "dogs", "IMG")
    exp_id = _paused(admin, model_dir, edited["id"], "in-images")
    described = admin.ok("project", "describe", "proj-space", "images").stdout
    assert "Associated Experiments" in described
    assert "in-images" in described
    assert "in-images" in admin.ok("project", "list-experiments", "proj-space", "images").stdout
    assert _experiment(admin, exp_id)["projectId"] == edited["id"]
    admin.ok("project", "archive", "proj-space", "images")
    assert _project(admin, "proj-space", "images")["archived"] is True
    _refused(admin.run("project", "edit", "proj-space", "images", "--key", "X"), "archived")
    admin.ok("project", "unarchive", "proj-space", "images")
    _refused(admin.run("project", "delete", "proj-space", "images", "--yes"), "holds 1 experiment")
    out = admin.ok("project", "delete", "proj-space", "nlp", "--yes").stdout
    assert "Successfully deleted project nlp." in out


def test_a_workspace_with_experiments_is_not_deleted_until_they_move(
    admin: Det, model_dir: Path
) -> None:
    admin.ok("workspace", "create", "busy")
    project = json.loads(admin.ok("project", "create", "busy", "work", "--json").stdout)
    exp_id = _paused(admin, model_dir, project["id"], "busy-exp")
    _refused(admin.run("workspace", "delete", "busy", "--yes"), "holds 1 experiment")
    assert _workspace(admin, "busy")["numExperiments"] == 1
    out = admin.ok("experiment", "move", str(exp_id), "Uncategorized", "Uncategorized").stdout
    assert f'Moved experiment {exp_id} to project "Uncategorized"' in out
    assert _experiment(admin, exp_id)["projectId"] == 1
    admin.ok("workspace", "delete", "busy", "--yes")


def test_a_user_without_a_role_sees_neither_the_workspace_nor_its_projects(
    admin: Det, model_dir: Path, tmp_path: Path
) -> None:
    admin.ok("workspace", "create", "private")
    project = json.loads(admin.ok("project", "create", "private", "secret", "--json").stdout)
    workspace_id = _workspace(admin, "private")["id"]
    _api(admin, "PUT", f"/workspaces/{workspace_id}/roles/default", {"role": "none"})
    admin.ok("user", "create", "outsider", "--password", "Long-passw0rd")
    outsider = det_at(Path(admin.executable).parents[1], admin.master, tmp_path / "outsider")
    outsider.login("outsider", "Long-passw0rd")
    assert "private" not in outsider.ok("workspace", "list").stdout
    _refused(outsider.run("project", "list", "private"), "No workspace found")
    _refused(outsider.run("project", "describe", "private", "secret"), "not found")
    _refused(outsider.run("workspace", "describe", "private"), "not found")
    config = _config(model_dir.parent, "sneaky", steps=1, sleep=0.0)
    _refused(
        outsider.run(
            "experiment",
            "create",
            config,
            str(model_dir),
            "--paused",
            "--project_id",
            str(project["id"]),
        ),
        "private",
    )
    mine = _paused(outsider, model_dir, 1, "outsiders")
    _refused(outsider.run("experiment", "move", str(mine), "private", "secret"), "not found")
    # nor may they move someone else's experiment into their own project
    theirs = _paused(admin, model_dir, 1, "admins")
    _refused(
        outsider.run("experiment", "move", str(theirs), "Uncategorized", "Uncategorized"),
        "cannot change",
    )


def test_workspace_storage_and_default_pools(admin: Det, model_dir: Path, tmp_path: Path) -> None:
    storage = tmp_path / "ws-storage"
    storage.mkdir()
    config = {"type": "shared_fs", "host_path": str(storage), "storage_path": "team"}
    admin.ok(
        "workspace",
        "create",
        "stored",
        "--checkpoint-storage-config",
        json.dumps(config),
        "--default-aux-pool",
        "aux-pool",
    )
    described = _workspace(admin, "stored")
    assert described["checkpointStorageConfig"] == config
    assert described["defaultAuxPool"] == "aux-pool"
    project = json.loads(admin.ok("project", "create", "stored", "runs", "--json").stdout)
    yaml_path = _config(model_dir.parent, "stored-run", steps=2, sleep=0.0)
    exp_id = _created_id(
        admin.ok(
            "experiment", "create", yaml_path, str(model_dir), "--project_id", str(project["id"])
        )
    )
    assert _wait_state(admin, exp_id, "STATE_COMPLETED", "STATE_ERROR") == "STATE_COMPLETED"
    stored = _experiment(admin, exp_id)["config"]
    assert isinstance(stored, dict)
    assert stored["checkpoint_storage"]["host_path"] == str(storage)
    uuids = set(UUID.findall(admin.ok("experiment", "list-checkpoints", str(exp_id)).stdout))
    assert uuids
    for uuid in uuids:
        assert (storage / "team" / uuid).is_dir(), sorted(p.name for p in storage.rglob("*"))
    # default pools: set by `edit`, applied to experiments that name no pool
    admin.ok("workspace", "edit", "stored", "--default-compute-pool", "gpu-pool")
    compute = _paused(admin, model_dir, project["id"], "compute")
    assert _experiment(admin, compute)["resourcePool"] == "gpu-pool"
    aux = _paused(admin, model_dir, project["id"], "aux", "--config", "resources.slots_per_trial=0")
    assert _experiment(admin, aux)["resourcePool"] == "aux-pool"
    named = _paused(
        admin, model_dir, project["id"], "named", "--config", "resources.resource_pool=default"
    )
    assert _experiment(admin, named)["resourcePool"] == "default"


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs a root agent")
def test_a_task_of_a_workspace_with_an_agent_user_runs_as_that_user(admin: Det) -> None:
    admin.ok(
        "workspace",
        "create",
        "as-user",
        "--agent-uid",
        "4243",
        "--agent-gid",
        "4244",
        "--agent-user",
        "wsuser",
        "--agent-group",
        "wsgroup",
    )
    group = _workspace(admin, "as-user")["agentUserGroup"]
    assert group == {
        "agentUid": 4243,
        "agentGid": 4244,
        "agentUser": "wsuser",
        "agentGroup": "wsgroup",
    }
    # an admin's task runs as the agent's user (root) elsewhere, as this workspace's user here
    done = admin.run(
        "cmd",
        "run",
        "-w",
        "as-user",
        "--config",
        "resources.slots=0",
        "echo IDENTITY $(id -u):$(id -g)",
        timeout=WAIT_S,
    )
    assert done.returncode == 0, describe(done)
    assert "IDENTITY 4243:4244" in done.stdout, describe(done)


def test_non_admins_cannot_set_a_workspace_agent_user(admin: Det, tmp_path: Path) -> None:
    admin.ok("user", "create", "member", "--password", "Long-passw0rd")
    member = det_at(Path(admin.executable).parents[1], admin.master, tmp_path / "member")
    member.login("member", "Long-passw0rd")
    _refused(
        member.run(
            "workspace",
            "create",
            "mine",
            "--agent-uid",
            "0",
            "--agent-gid",
            "0",
            "--agent-user",
            "root",
            "--agent-group",
            "root",
        ),
        "cluster admin",
    )
    made = json.loads(member.ok("workspace", "create", "mine", "--json").stdout)
    assert made["username"] == "member"
    assert "agentUserGroup" not in made or made["agentUserGroup"] is None
    _refused(member.run("workspace", "edit", "mine", "--agent-uid", "1"), "cluster admin")
    member.ok("workspace", "delete", "mine", "--yes")


def test_the_official_sdk(admin: Det, det_venv: Path, model_dir: Path) -> None:
    exp_id = _paused(admin, model_dir, 1, "sdk-moved")
    result = sdk_result(det_venv, admin, WORKFLOWS / "workspaces_sdk.py", str(exp_id))
    assert result["created"] == "sdk-space"
    assert result["got"] is True
    assert "sdk-space" in result["listed"]
    assert result["key"].startswith("SDK")
    assert result["project"] == {
        "name": "sdk-renamed",
        "description": "second",
        "key": "SDK1",
        "notes": [{"name": "later", "contents": "ship it"}],
        "workspace_id": True,
        "username": "admin",
    }
    assert result["projects"] == ["sdk-renamed"]
    assert result["archived"] is True
    assert result["moved_in"] == [exp_id]
    assert result["experiment_project"] is True
    assert (result["unpinned"], result["pinned"]) == (False, True)
    assert result["after_delete"] == []
    assert "sdk-space" not in result["remaining"]
    assert _experiment(admin, exp_id)["projectId"] == 1
