"""``stalwart checkpoint ...`` against a real master and agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stalwart.client import Experiment
from tests.cli.conftest import Cli, one_error_line


def test_describe_and_download(
    cli: Cli, finished: Experiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    best = finished.top_checkpoint()
    assert best is not None
    described = cli("checkpoint", "describe", best.uuid)
    assert described.code == 0, described.err
    assert f"Checkpoint {best.uuid}" in described.out
    assert "State: COMPLETED" in described.out
    assert "Batches: 4" in described.out
    assert "state.json" in described.out
    assert json.loads(cli("checkpoint", "describe", best.uuid, "--json").out)["uuid"] == best.uuid

    target = tmp_path / "out"
    downloaded = cli("checkpoint", "download", best.uuid, "-o", str(target))
    assert downloaded.code == 0, downloaded.err
    assert downloaded.out.strip() == f"Local checkpoint path: {target}"
    assert json.loads((target / "state.json").read_text()) == {"step": 4}

    monkeypatch.chdir(tmp_path)
    assert cli("checkpoint", "download", best.uuid).code == 0
    assert (tmp_path / "checkpoints" / best.uuid / "state.json").is_file()


def test_unknown_checkpoint_is_one_line(cli: Cli) -> None:
    uuid = "00000000-0000-0000-0000-000000000000"
    for command in ("describe", "download"):
        result = cli("checkpoint", command, uuid)
        assert result.code == 1
        assert one_error_line(result.err) == f"error: checkpoint {uuid} not found"
