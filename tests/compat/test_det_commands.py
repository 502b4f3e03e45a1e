"""Commands with the official ``det`` CLI (``det cmd``, ``det task``) against a real master and
a real agent: the output streams back, the files of ``-c`` arrive, kills stop them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.compat.conftest import Det, describe
from tests.compat.test_det_workflows import UUID, admin, agent

__all__ = ["admin", "agent"]  # the module-wide master's agent and logged-in admin

pytestmark = pytest.mark.compat

WAIT_S = 60.0


def _commands(cli: Det) -> list[dict[str, object]]:
    listed = json.loads(cli.ok("cmd", "list", "--all", "--json").stdout)
    assert isinstance(listed, list)
    return listed


def _wait_command(cli: Det, command_id: str, state: str) -> dict[str, object]:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = json.loads(cli.ok("cmd", "describe", command_id, "--json").stdout)
        if found["state"] == state or time.monotonic() > deadline:
            assert found["state"] == state, found
            return dict(found)
        time.sleep(0.5)


def test_cmd_run_prints_the_output_and_the_task_is_listed(admin: Det) -> None:
    done = admin.ok("cmd", "run", "echo hello from a command")
    assert "hello from a command" in done.stdout, describe(done)
    command_id = UUID.search(done.stdout)
    assert command_id is not None, describe(done)
    found = _wait_command(admin, command_id.group(0), "TERMINATED")
    assert found["exitStatus"] == "exited with code 0"
    assert found["username"] == "admin"
    assert any(c["id"] == command_id.group(0) for c in _commands(admin))
    logs = admin.ok("task", "logs", command_id.group(0)).stdout
    assert "hello from a command" in logs


def test_cmd_run_with_a_context_directory(admin: Det, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("the uploaded file\n")
    done = admin.ok("cmd", "run", "-c", str(tmp_path), "cat data.txt")
    assert "the uploaded file" in done.stdout, describe(done)


def test_a_failing_command_reports_its_exit_code(admin: Det) -> None:
    done = admin.ok("cmd", "run", "--config", "resources.slots=0", "exit 3")
    command_id = UUID.search(done.stdout)
    assert command_id is not None, describe(done)
    found = _wait_command(admin, command_id.group(0), "TERMINATED")
    assert str(found["exitStatus"]).startswith("exited with code 3"), found


def test_a_detached_command_is_killed(admin: Det) -> None:
    done = admin.ok("cmd", "run", "-d", "sleep 600")
    command_id = done.stdout.strip()
    assert UUID.fullmatch(command_id), describe(done)
    _wait_command(admin, command_id, "RUNNING")
    assert command_id in admin.ok("task", "list").stdout  # live allocations
    admin.ok("cmd", "kill", command_id)
    found = _wait_command(admin, command_id, "TERMINATED")
    assert found["exitStatus"] != "exited with code 0", found
    config = admin.ok("cmd", "config", command_id).stdout
    assert "sleep 600" in config


def test_a_command_needs_an_entrypoint(admin: Det) -> None:
    done = admin.run("cmd", "run")
    assert done.returncode != 0
    assert "needs an entrypoint" in done.stdout + done.stderr, describe(done)


def test_det_task_create_runs_a_generic_task_with_its_files(admin: Det, tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "note.txt").write_text("generic task files\n")
    config = tmp_path / "task.yaml"
    config.write_text("entrypoint: ['sh', '-c', 'cat note.txt']\nresources:\n  slots: 0\n")
    done = admin.ok("task", "create", str(config), "-c", str(context), "--follow")
    assert "generic task files" in done.stdout, describe(done)
    task_id = UUID.search(done.stdout)
    assert task_id is not None, describe(done)
    shown = admin.ok("task", "config", task_id.group(0)).stdout
    assert "cat note.txt" in shown
