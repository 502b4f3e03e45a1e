"""``det trial logs`` and ``det task logs`` (determined 0.38.1) with every filter flag the
official CLI has (``--head``, ``--tail``, ``-f``, ``--rank-id``, ``--level``, ``--stdtype``,
``--source``, ``--agent-id``, ``--container-id``, ``--timestamp-before``/``-after``), and
``searchText`` through the official SDK's ``trial_logs`` (the CLI has no flag for it), against
``stalwart master`` and a local agent running ``workflows/logs_trial.py``."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import (
    Det,
    MasterProcess,
    describe,
    local_agent,
    logged_in_admin,
    sdk_result,
)

pytestmark = pytest.mark.compat

WORKFLOWS = Path(__file__).parent / "workflows"
WAIT_S = 90
MARKS = sorted(["MARK alpha\n", "MARK beta\n", "MARK gamma\n", "MARK delta\n"])


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    yield from local_agent(stalwart_master, "logs-agent", 1)


@pytest.fixture(scope="module")
def admin(
    det_venv: Path,
    stalwart_master: MasterProcess,
    agent: LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Det:
    return logged_in_admin(det_venv, stalwart_master, tmp_path_factory)


@pytest.fixture(scope="module")
def ended(admin: Det, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    """A completed trial that printed the MARK lines: ``(trial id, task id)``."""
    model = tmp_path_factory.mktemp("model")
    shutil.copy(WORKFLOWS / "logs_trial.py", model / "logs_trial.py")
    config = model / "logs.yaml"
    config.write_text(
        "name: logs\nentrypoint: python3 logs_trial.py\nmax_restarts: 0\n"
        "searcher:\n  name: single\n  metric: loss\n",
        encoding="utf-8",
    )
    created = admin.ok("experiment", "create", str(config), str(model))
    found = re.search(r"Created experiment (\d+)", created.stdout)
    assert found, describe(created)
    exp_id = found.group(1)
    waited = admin.run("experiment", "wait", exp_id, "--polling-interval", "1", timeout=WAIT_S)
    assert waited.returncode == 0, describe(waited)
    with httpx.Client(base_url=admin.master.url, timeout=30) as http:
        token = http.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
        http.headers["Authorization"] = f"Bearer {token.json()['token']}"
        (trial,) = http.get(f"/api/v1/experiments/{exp_id}/trials").json()["trials"]
        task_id = http.get(f"/api/v1/trials/{trial['id']}").json()["trial"]["taskId"]
    return int(trial["id"]), str(task_id)


def _json_logs(admin: Det, *args: str) -> list[dict[str, Any]]:
    """The entries ``det ... logs --json ARGS`` printed: indented JSON documents, one after
    another, then the CLI's closing hint."""
    done = admin.ok(*args, "--json")
    decoder = json.JSONDecoder()
    text, at = done.stdout, 0
    out: list[dict[str, Any]] = []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if not text.startswith("{", at):
            return out
        entry, at = decoder.raw_decode(text, at)
        out.append(entry)


def _marks(entries: list[dict[str, Any]]) -> list[str]:
    return [e["log"] for e in entries if e["log"].startswith("MARK")]


def test_trial_and_task_logs_filters(admin: Det, ended: tuple[int, str]) -> None:
    trial_id, task_id = ended
    for kind, ident in (("trial", str(trial_id)), ("task", task_id)):
        everything = _json_logs(admin, kind, "logs", ident)
        # stdout keeps its order; stderr's line may arrive before or after it
        assert sorted(_marks(everything)) == MARKS, everything
        gamma = next(e for e in everything if e["log"] == "MARK gamma\n")
        alpha = next(e for e in everything if e["log"] == "MARK alpha\n")

        def marks(*flags: str, kind: str = kind, ident: str = ident) -> list[str]:
            return sorted(_marks(_json_logs(admin, kind, "logs", ident, *flags)))

        assert marks("--rank-id", "1") == ["MARK beta\n"]
        assert marks("--rank-id", "0", "--rank-id", "1") == ["MARK alpha\n", "MARK beta\n"]
        assert marks("--stdtype", "stderr") == ["MARK gamma\n"]
        assert marks("--source", "agent") == []
        assert marks("--source", "task") == MARKS
        assert marks("--agent-id", "logs-agent") == MARKS
        assert marks("--agent-id", "elsewhere") == []
        assert marks("--container-id", str(gamma["containerId"])) == MARKS
        after = marks("--timestamp-after", alpha["timestamp"])
        assert "MARK alpha\n" not in after
        assert "MARK delta\n" in after
        before = marks("--timestamp-before", alpha["timestamp"])
        assert "MARK alpha\n" in before
        assert "MARK delta\n" not in before
        tail = _json_logs(admin, kind, "logs", ident, "--tail", "2")
        assert [e["id"] for e in tail] == [e["id"] for e in everything[-2:]]
        head = _json_logs(admin, kind, "logs", ident, "--head", "2")
        assert [e["id"] for e in head] == [e["id"] for e in everything[:2]]
        followed = _json_logs(admin, kind, "logs", ident, "-f", "--stdtype", "stderr")
        assert _marks(followed) == ["MARK gamma\n"]  # ends: the trial is over
    # det trial logs --level: that level and above (det task logs' --level is broken in 0.38.1)
    warned = _json_logs(admin, "trial", "logs", str(trial_id), "--level", "WARNING")
    assert sorted(_marks(warned)) == ["MARK beta\n", "MARK gamma\n"]


def test_search_text_through_the_official_sdk(
    det_venv: Path, admin: Det, ended: tuple[int, str]
) -> None:
    trial_id, _task_id = ended
    script = WORKFLOWS / "logs_search_sdk.py"
    assert sdk_result(det_venv, admin, script, str(trial_id), "MARK g") == ["MARK gamma\n"]
    assert sdk_result(det_venv, admin, script, str(trial_id), "mark g") == []  # case-sensitive
    assert sorted(sdk_result(det_venv, admin, script, str(trial_id), "MARK")) == MARKS
