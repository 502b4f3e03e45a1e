"""``stalwart user-group ...`` and ``stalwart resource-pool bindings ...`` against a real master
(no agent) with a second resource pool."""

from __future__ import annotations

import json

import pytest

from stalwart.local import LocalCluster
from tests.cli.conftest import Cli, one_error_line
from tests.client.test_groups import master

__all__ = ["master"]


@pytest.fixture(scope="module")
def cluster(master: LocalCluster) -> LocalCluster:
    """The ``cli`` fixture's master: this module's, which has pool ``second``."""
    return master


def test_user_group_commands(cli: Cli) -> None:
    assert cli("user", "create", "cli-bob", "--password", "Long-password-1").code == 0
    made = cli("user-group", "create", "cli-team", "--add-user", "cli-bob")
    assert made.code == 0, made.err
    assert made.out.startswith("Created user group cli-team (ID ")
    assert "with cli-bob" in made.out
    listed = cli("user-group", "list")
    assert "cli-team" in listed.out
    assert json.loads(cli("user-group", "list", "--json").out)[0]["numMembers"] == 1
    assert cli("user-group", "add-user", "cli-team", "admin").out.strip() == (
        "Added admin to user group cli-team."
    )
    described = cli("user-group", "describe", "cli-team")
    assert "cli-bob" in described.out
    assert "admin" in described.out
    twice = cli("user-group", "add-user", "cli-team", "admin")
    assert twice.code == 1
    assert "admin already in user group 'cli-team'" in one_error_line(twice.err)
    assert cli("user-group", "remove-user", "cli-team", "admin").code == 0
    assert cli("user-group", "set-role", "cli-team", "team", "viewer").out.strip() == (
        "User group cli-team has role viewer in workspace team."
    )
    assert cli("user-group", "remove-role", "cli-team", "team").code == 0
    assert cli("user-group", "rename", "cli-team", "cli-crew").code == 0
    mine = json.loads(cli("user-group", "list", "--member", "cli-bob", "--json").out)
    assert [g["group"]["name"] for g in mine] == ["cli-crew"]
    assert cli("user-group", "delete", "cli-crew").out.strip() == "Deleted user group cli-crew."
    missing = cli("user-group", "describe", "cli-crew")
    assert missing.code == 1
    assert "user group 'cli-crew' not found" in one_error_line(missing.err)


def test_resource_pool_bindings_commands(cli: Cli) -> None:
    assert cli("resource-pool", "bindings", "list", "second").out.strip() == (
        "second: not bound (serves every workspace)"
    )
    assert cli("resource-pool", "bindings", "add", "second", "team").code == 0
    assert cli("resource-pool", "bindings", "list", "second").out.strip() == "second: team"
    assert cli("resource-pool", "bindings", "replace", "second", "Uncategorized").code == 0
    listed = cli("resource-pool", "bindings", "list", "second", "--json")
    assert json.loads(listed.out) == ["Uncategorized"]
    assert cli("resource-pool", "bindings", "remove", "second", "Uncategorized").code == 0
    refused = cli("resource-pool", "bindings", "add", "default", "team")
    assert refused.code == 1
    assert "is a default pool" in one_error_line(refused.err)
