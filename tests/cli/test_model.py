"""``stalwart model ...`` against a real master and agent."""

from __future__ import annotations

import json

from stalwart.client import Experiment
from tests.cli.conftest import Cli, one_error_line


def test_model_commands(cli: Cli, finished: Experiment) -> None:
    best = finished.top_checkpoint()
    assert best is not None
    created = cli("model", "create", "cli-registry", "--description", "tiny", "--label", "x")
    assert created.code == 0, created.err
    assert "Model cli-registry" in created.out
    listed = cli("model", "list", "--json")
    assert "cli-registry" in [m["name"] for m in json.loads(listed.out)]
    registered = cli("model", "register-version", "cli-registry", best.uuid, "--name", "v1")
    assert registered.code == 0, registered.err
    assert f"Registered checkpoint {best.uuid} as version 1 of cli-registry" in registered.out
    described = cli("model", "describe", "cli-registry")
    assert described.code == 0, described.err
    assert best.uuid in described.out
    assert "Versions: 1" in described.out
    as_json = json.loads(cli("model", "describe", "cli-registry", "--json").out)
    assert as_json["versions"][0]["checkpoint"]["uuid"] == best.uuid
    changed = cli("model", "set", "cli-registry", "--notes", "n", "--metadata", '{"a": 1}')
    assert changed.code == 0, changed.err
    assert "Metadata: a=1" in changed.out
    assert cli("model", "archive", "cli-registry").code == 0
    refused = cli("model", "register-version", "cli-registry", best.uuid)
    assert refused.code == 1
    assert "archived" in one_error_line(refused.err)
    assert cli("model", "unarchive", "cli-registry").code == 0
    assert cli("model", "delete-version", "cli-registry", "1").code == 0
    assert cli("model", "delete", "cli-registry").code == 0
    gone = cli("model", "describe", "cli-registry")
    assert gone.code == 1
    assert one_error_line(gone.err) == "error: model 'cli-registry' not found"


def test_bad_metadata_is_one_line(cli: Cli) -> None:
    result = cli("model", "create", "bad-meta", "--metadata", "[1]")
    assert result.code == 1
    assert one_error_line(result.err) == "error: --metadata must be a JSON object"
