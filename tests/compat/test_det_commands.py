"""Commands with the official ``det`` CLI (``det cmd``, ``det task``) against a real master and
a real agent: the output streams back, the files of ``-c`` arrive, kills stop them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess, describe
from tests.compat.test_det_workflows import UUID, _det

pytestmark = pytest.mark.compat

AGENT_ID = "commands"
WAIT_S = 60.0


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    """A local agent with two slots, attached to the module's master."""
    port = urlparse(stalwart_master.url).port
    assert port is not None
    cluster = LocalCluster(home=stalwart_master.home, port=port)
    cluster.start_agent(AGENT_ID, slots=2)
    try:
        yield cluster
    finally:
        cluster.stop_agent(AGENT_ID)


@pytest.fixture(scope="module")
def admin(
    det_venv: Path,
    stalwart_master: MasterProcess,
    agent: LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Det:
    """The official CLI logged in as ``admin``."""
    cli = _det(det_venv, stalwart_master, tmp_path_factory.mktemp("admin"))
    cli.login("admin", "")
    return cli


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
