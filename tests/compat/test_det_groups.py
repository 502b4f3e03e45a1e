"""The official 0.38.1 CLI's ``det user-group`` and ``det rbac`` against a Stalwart master: groups
made and changed by an admin, a role given to a group (``det rbac assign-role ... -g``) opening a
private workspace's experiment to its members and taken away again, and what non-admins are
refused. No agent: the experiments never run.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.compat.conftest import Det, MasterProcess, describe, det_at, logged_in_admin
from tests.compat.test_det_workflows import WORKFLOWS, _config, _created_id

pytestmark = pytest.mark.compat

PASSWORD = "Long-password-1"


@pytest.fixture(scope="module")
def admin(
    det_venv: Path, stalwart_master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Det:
    cli = logged_in_admin(det_venv, stalwart_master, tmp_path_factory)
    for name in ("alice", "bob"):
        cli.ok("user", "create", name, "--password", PASSWORD)
    return cli


def _user(det_venv: Path, master: MasterProcess, tmp_path: Path, name: str) -> Det:
    cli = det_at(det_venv, master, tmp_path / name)
    cli.login(name, PASSWORD)
    return cli


def _private_experiment(admin: Det, master: MasterProcess, tmp_path: Path) -> int:
    """A paused experiment in workspace ``private`` (default role none). The workspace, its
    project and the move are written into the master's database: creating workspaces and
    moving experiments are other commands' business."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "trial.py").write_text((WORKFLOWS / "trial.py").read_text())
    config = _config(tmp_path, "private-work", steps=1, sleep=0.0)
    exp_id = _created_id(admin.ok("experiment", "create", config, str(model), "--paused"))
    with sqlite3.connect(master.home / "master.db") as db:
        ws = db.execute(
            "INSERT INTO workspaces (name, archived, immutable, default_role) "
            "VALUES ('private', 0, 0, 'none')"
        ).lastrowid
        project = db.execute(
            "INSERT INTO projects (name, description, workspace_id, archived, immutable) "
            "VALUES ('private-project', '', ?, 0, 0)",
            (ws,),
        ).lastrowid
        db.execute("UPDATE experiments SET project_id = ? WHERE id = ?", (project, exp_id))
    return exp_id


def _groups(cli: Det) -> dict[str, dict[str, object]]:
    listed = json.loads(cli.ok("user-group", "list", "--json").stdout)
    return {g["group"]["name"]: g for g in listed["groups"] or []}


def test_admins_make_and_change_groups(admin: Det) -> None:
    made = admin.ok("user-group", "create", "readers", "--add-user", "alice")
    assert "user group with name readers and ID" in made.stdout, describe(made)
    assert "alice was added to the group" in made.stdout
    assert _groups(admin)["readers"]["numMembers"] == 1

    added = admin.ok("user-group", "add-user", "readers", "bob")
    assert "user added to group with username bob" in added.stdout
    described = json.loads(admin.ok("user-group", "describe", "readers", "--json").stdout)
    assert [u["username"] for u in described["users"]] == ["alice", "bob"]
    table = admin.ok("user-group", "describe", "readers").stdout
    assert "alice" in table
    assert "bob" in table

    mine = json.loads(
        admin.ok("user-group", "list", "--groups-user-belongs-to", "bob", "--json").stdout
    )
    assert [g["group"]["name"] for g in mine["groups"]] == ["readers"]

    twice = admin.run("user-group", "add-user", "readers", "bob")
    assert twice.returncode != 0
    assert "bob already in user group 'readers'" in twice.stdout + twice.stderr, describe(twice)

    admin.ok("user-group", "remove-user", "readers", "bob")
    assert _groups(admin)["readers"]["numMembers"] == 1
    admin.ok("user-group", "change-name", "readers", "watchers")
    assert set(_groups(admin)) == {"watchers"}
    clash = admin.ok("user-group", "create", "other")
    assert "other" in clash.stdout
    taken = admin.run("user-group", "change-name", "other", "watchers")
    assert taken.returncode != 0
    assert "already exists" in taken.stdout + taken.stderr, describe(taken)
    deleted = admin.ok("user-group", "delete", "other", "--yes")
    assert "deleted" in deleted.stdout
    assert set(_groups(admin)) == {"watchers"}
    admin.ok("user-group", "delete", "watchers", "--yes")


def test_non_admins_read_groups_but_cannot_change_them(
    admin: Det, det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    admin.ok("user-group", "create", "admins-only", "--add-user", "alice")
    bob = _user(det_venv, stalwart_master, tmp_path, "bob")
    assert "admins-only" in _groups(bob)
    for args in (
        ("user-group", "create", "mine"),
        ("user-group", "add-user", "admins-only", "bob"),
        ("user-group", "change-name", "admins-only", "bobs"),
        ("user-group", "delete", "admins-only", "--yes"),
    ):
        refused = bob.run(*args)
        assert refused.returncode != 0, describe(refused)
        assert "only a cluster admin can" in refused.stdout + refused.stderr, describe(refused)
    assert _groups(admin)["admins-only"]["numMembers"] == 1
    admin.ok("user-group", "delete", "admins-only", "--yes")


def _sees(cli: Det, exp_id: int) -> bool:
    return cli.run("experiment", "describe", str(exp_id), "--json").returncode == 0


def test_a_role_given_to_a_group_opens_a_private_workspace(
    admin: Det, det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    exp_id = _private_experiment(admin, stalwart_master, tmp_path)
    alice = _user(det_venv, stalwart_master, tmp_path, "alice")
    bob = _user(det_venv, stalwart_master, tmp_path, "bob")
    assert not _sees(alice, exp_id)

    admin.ok("user-group", "create", "team", "--add-user", "alice")
    roles = admin.ok("rbac", "list-roles").stdout
    for name in ("Viewer", "Member", "Editor", "WorkspaceAdmin"):
        assert f"role '{name}'" in roles, roles
    given = admin.ok("rbac", "assign-role", "Viewer", "-g", "team", "-w", "private")
    assert "assigned role 'Viewer'" in given.stdout
    assert "to group 'team'" in given.stdout
    assert _sees(alice, exp_id)
    assert not _sees(bob, exp_id)  # not in the group
    listed = admin.ok("rbac", "list-groups-roles", "team").stdout
    assert "role 'Viewer'" in listed, listed
    assert "private" in listed, listed

    paused = alice.run("experiment", "pause", str(exp_id))  # a viewer reads, never changes
    assert paused.returncode != 0
    assert "cannot change experiment" in paused.stdout + paused.stderr, describe(paused)
    admin.ok("rbac", "assign-role", "Editor", "-g", "team", "-w", "private")
    alice.ok("experiment", "activate", str(exp_id))
    alice.ok("experiment", "pause", str(exp_id))
    described = admin.ok("rbac", "describe-role", "Editor").stdout
    assert "role is assigned to groups" in described, described
    assert "team" in described
    mine = alice.ok("rbac", "my-permissions").stdout
    assert "permissions assigned over workspace 'private'" in mine, mine
    assert "change every experiment of the workspace" in mine
    users_roles = admin.ok("rbac", "list-users-roles", "alice").stdout
    assert "Editor" in users_roles, users_roles
    assert "team" in users_roles, users_roles

    admin.ok("user-group", "add-user", "team", "bob")
    assert _sees(bob, exp_id)
    admin.ok("user-group", "remove-user", "team", "bob")
    assert not _sees(bob, exp_id)

    wrong = admin.run("rbac", "unassign-role", "Viewer", "-g", "team", "-w", "private")
    assert wrong.returncode != 0
    assert "its role there is Editor" in wrong.stdout + wrong.stderr, describe(wrong)
    removed = admin.ok("rbac", "unassign-role", "Editor", "-g", "team", "-w", "private")
    assert "removed role 'Editor'" in removed.stdout
    assert not _sees(alice, exp_id)

    # cluster-wide roles do not exist here; a non-admin of the workspace cannot give roles
    global_role = admin.run("rbac", "assign-role", "Viewer", "-g", "team")
    assert global_role.returncode != 0
    assert "not cluster-wide" in global_role.stdout + global_role.stderr, describe(global_role)
    self_grant = alice.run("rbac", "assign-role", "Editor", "-g", "team", "-w", "Uncategorized")
    assert self_grant.returncode != 0
    assert "can change its role assignments" in self_grant.stdout + self_grant.stderr

    # a direct user assignment through det rbac works the same way
    admin.ok("rbac", "assign-role", "Viewer", "-u", "bob", "-w", "private")
    assert _sees(bob, exp_id)
    admin.ok("rbac", "unassign-role", "Viewer", "-u", "bob", "-w", "private")
    assert not _sees(bob, exp_id)

    # deleting the group takes its roles away
    admin.ok("rbac", "assign-role", "Viewer", "-g", "team", "-w", "private")
    assert _sees(alice, exp_id)
    admin.ok("user-group", "delete", "team", "--yes")
    assert not _sees(alice, exp_id)
