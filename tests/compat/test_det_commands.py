"""Commands with the official ``det`` CLI (``det cmd``, ``det task``) against a real master and
a real agent: the output streams back, the files of ``-c`` arrive, kills stop them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.compat.conftest import Det, describe, sdk_result
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


TASK_STATE = """
import sys, time
from determined.common.api import bindings
from determined.experimental import client
d = client.Determined(master=sys.argv[1], user="admin", password="")
deadline = time.monotonic() + 60
while True:
    task = bindings.get_GetTask(d._session, taskId=sys.argv[2]).task
    state = task.taskState.value if task.taskState else None
    if state == sys.argv[3] or time.monotonic() > deadline:
        print("SDK_RESULT", '"%s"' % state)
        break
    time.sleep(0.3)
"""


def _wait_log_count(cli: Det, task_id: str, text: str, count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        logs = cli.ok("task", "logs", task_id).stdout
        if logs.count(text) >= count or time.monotonic() > deadline:
            assert logs.count(text) == count, logs
            return
        time.sleep(0.5)


def test_det_task_pause_and_unpause_run_a_generic_task_again(
    det_venv: Path, admin: Det, tmp_path: Path
) -> None:
    config = tmp_path / "task.yaml"
    config.write_text(
        "entrypoint: ['sh', '-c', 'echo run-started; sleep 600']\nresources:\n  slots: 0\n"
    )
    created = admin.ok("task", "create", str(config)).stdout
    found = UUID.search(created)
    assert found is not None, created
    task_id = found.group(0)
    state_script = tmp_path / "state.py"
    state_script.write_text(TASK_STATE)
    try:
        _wait_log_count(admin, task_id, "run-started", 1)
        refused = admin.run("task", "unpause", task_id)
        assert refused.returncode != 0
        assert "not in paused state" in refused.stdout + refused.stderr
        assert f"Paused task: {task_id}" in admin.ok("task", "pause", task_id).stdout
        paused = sdk_result(det_venv, admin, state_script, task_id, "GENERIC_TASK_STATE_PAUSED")
        assert paused == "GENERIC_TASK_STATE_PAUSED"
        again = admin.run("task", "pause", task_id)
        assert again.returncode != 0
        assert "in state 'PAUSED'" in again.stdout + again.stderr
        assert f"Unpaused task: {task_id}" in admin.ok("task", "unpause", task_id).stdout
        _wait_log_count(admin, task_id, "run-started", 2)  # the entrypoint ran again
        assert task_id in admin.ok("task", "list").stdout  # running again
    finally:
        admin.run("task", "kill", task_id)
    command = admin.ok("cmd", "run", "-d", "sleep 600").stdout.strip()
    try:
        refused = admin.run("task", "pause", command)
        assert refused.returncode != 0
        assert "only generic tasks" in refused.stdout + refused.stderr
    finally:
        admin.ok("cmd", "kill", command)
