"""``stalwart token``, ``stalwart job`` and ``stalwart resources`` against the package's real
master and agent."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

import pytest

from stalwart.client import Client, Experiment
from tests.cli.conftest import Cli, one_error_line


def test_token_create_login_and_revoke(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = cli("token", "create", "-e", "2", "-d", "cli test")
    assert made.code == 0, made.err
    found = re.search(r"TokenID: (\d+)\nAccess-Token: (\S+)", made.out)
    assert found, made.out
    token_id, token = found.group(1), found.group(2)
    listed = json.loads(cli("token", "list", "--json").out)
    assert [t["description"] for t in listed if str(t["id"]) == token_id] == ["cli test"]
    assert cli("token", "edit", token_id, "-d", "renamed").code == 0
    assert "renamed" in cli("token", "describe", token_id).out
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "fresh"))  # a client that knows nobody
    login = cli("token", "login", token)
    assert login.code == 0, login.err
    assert "Authenticated as admin." in login.out
    assert cli("token", "revoke", token_id).code == 0
    refused = cli("token", "login", token)
    assert refused.code != 0
    assert f"access token {token_id} was revoked" in one_error_line(refused.err)


def test_job_list_and_update(cli: Cli, admin: Client) -> None:
    task = admin.launch_command("sleep 60", {"resources": {"slots": 0}})
    try:
        deadline = time.monotonic() + 30
        while task.id not in cli("job", "list").out:
            assert time.monotonic() < deadline, "the command never reached the queue"
            time.sleep(0.2)
        assert cli("job", "update", task.id, "--priority", "5").code == 0
        jobs = json.loads(cli("job", "list", "--json").out)
        assert [j["priority"] for j in jobs if j["jobId"] == task.id] == [5]
        refused = cli("job", "update", task.id, "--weight", "2")
        assert refused.code != 0
        assert "fair_share" in one_error_line(refused.err)
        missing = cli("job", "update", "no-such-job", "--priority", "5")
        assert "job no-such-job not found" in one_error_line(missing.err)
    finally:
        admin.kill_task(task.id)


def test_resources(cli: Cli, finished: Experiment) -> None:
    now = dt.datetime.now(dt.UTC)
    after = (now - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = (now + dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    table = cli("resources", "allocations", after, before)
    assert table.code == 0, table.err
    assert table.out.splitlines()[0].endswith(",seconds,pull_seconds")
    raw = json.loads(cli("resources", "raw", after, before, "--json").out)
    assert any(e["experimentId"] == finished.id for e in raw)
    day = now.date().isoformat()
    start = (now - dt.timedelta(hours=1)).date().isoformat()
    by_user = cli("resources", "aggregated", start, day, "--by", "user")
    assert by_user.code == 0, by_user.err
    assert "admin" in by_user.out
    bad = cli("resources", "aggregated", "yesterday", day)
    assert "is not a date" in one_error_line(bad.err)
