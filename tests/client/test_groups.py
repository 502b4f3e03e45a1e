"""The SDK's ``client.groups`` and ``client.pool_bindings`` against a real master (no agent)
whose config names a second resource pool."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.client import Client
from stalwart.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
)
from stalwart.local import LocalCluster
from tests.integration.conftest import free_port

MASTER_CONFIG = "resource_pools:\n  - pool_name: second\n"


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A master with pools ``default`` and ``second`` and a workspace ``team`` (written into its
    database: creating workspaces is another command's business)."""
    root = tmp_path_factory.mktemp("groups-master")
    (root / "master.yaml").write_text(MASTER_CONFIG)
    cluster = LocalCluster(home=root / "home", port=free_port(), master_config=root / "master.yaml")
    try:
        cluster.start_master()
        with sqlite3.connect(cluster.home / "master.db") as db:
            db.execute("INSERT INTO workspaces (name, archived, immutable) VALUES ('team', 0, 0)")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def admin(master: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    config_dir = tmp_path_factory.mktemp("admin-config")
    with Client(master.url, "admin", "", config_dir=config_dir, environ={}) as client:
        client.create_user("sdk-alice", password="Long-password-1")
        yield client


def test_groups_through_the_sdk(admin: Client, master: LocalCluster, tmp_path: Path) -> None:
    made = admin.groups.create("sdk-team", ["sdk-alice"])
    assert [u.username for u in made.users] == ["sdk-alice"]
    with pytest.raises(AlreadyExistsError):
        admin.groups.create("sdk-team")
    assert [g.group.name for g in admin.groups.list(member="sdk-alice")] == ["sdk-team"]
    admin.groups.add_members("sdk-team", ["admin"])
    assert {u.username for u in admin.groups.get("sdk-team").users} == {"sdk-alice", "admin"}
    admin.groups.remove_members("sdk-team", ["admin"])
    admin.groups.rename("sdk-team", "sdk-crew")
    with pytest.raises(NotFoundError, match="user group 'sdk-team' not found"):
        admin.groups.get("sdk-team")

    roles = admin.groups.set_role("sdk-crew", "team", "editor")
    assert [(g.group_name, g.role) for g in roles.group_assignments] == [("sdk-crew", "editor")]
    with pytest.raises(InvalidArgumentError, match="unknown role 'owner'"):
        admin.groups.set_role("sdk-crew", "team", "owner")
    with Client(
        master.url, "sdk-alice", "Long-password-1", config_dir=tmp_path, environ={}
    ) as alice:
        assert [g.group.name for g in alice.groups.list()] == ["sdk-crew"]
        with pytest.raises(ForbiddenError, match="only a cluster admin can"):
            alice.groups.create("mine")
        with pytest.raises(ForbiddenError, match="can change its role assignments"):
            alice.groups.set_role("sdk-crew", "Uncategorized", "admin")
    assert admin.groups.remove_role("sdk-crew", "team").group_assignments == []
    admin.groups.delete("sdk-crew")
    assert admin.groups.list() == []


def test_pool_bindings_through_the_sdk(admin: Client) -> None:
    bindings = admin.pool_bindings
    assert bindings.list("second") == []
    bindings.add("second", ["team"])
    assert bindings.list("second") == ["team"]
    bindings.replace("second", ["Uncategorized", "team"])
    assert bindings.list("second") == ["Uncategorized", "team"]
    bindings.remove("second", ["Uncategorized", "team"])
    assert bindings.list("second") == []
    with pytest.raises(FailedPreconditionError, match="is a default pool"):
        bindings.add("default", ["team"])
    with pytest.raises(NotFoundError, match="workspace 'atlantis' not found"):
        bindings.add("second", ["atlantis"])
