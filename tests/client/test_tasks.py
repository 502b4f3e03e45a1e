"""Interactive tasks through the SDK against the package's real master and agent: a command
with a context directory, its logs and exit code; a notebook that becomes ready and answers at
its URL; listing, getting by id alone, killing."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from stalwart.client import Client, InteractiveTask, TaskEndedError
from stalwart.errors import InvalidArgumentError, NotFoundError

WAIT_S = 90.0


def test_a_command_runs_with_its_context_and_reports_its_exit_code(
    admin: Client, tmp_path: Path
) -> None:
    (tmp_path / "data.txt").write_text("from the context\n")
    (tmp_path / ".stalwartignore").write_text("secret.txt\n")
    (tmp_path / "secret.txt").write_text("left out\n")
    task = admin.launch_command(
        "cat data.txt; ls; echo to-stderr >&2; exit 3",
        {"description": "sdk command", "resources": {"slots": 0}},
        tmp_path,
    )
    assert task.kind == "command"
    assert task.description == "sdk command"
    assert task.owner == "admin"
    lines = list(task.logs(follow=True))  # ends once the command ended
    text = "".join(line.log for line in lines)
    assert "from the context\n" in text
    assert "secret.txt" not in text
    assert any(line.log == "to-stderr\n" and line.stdtype == "stderr" for line in lines)
    assert task.wait(timeout=WAIT_S, interval=0.1).startswith("exited with code 3")
    assert task.exit_code() == 3
    assert task.state == "TERMINATED"
    assert [line.log for line in task.logs(tail=1)] == [lines[-1].log]

    same = admin.get_interactive(task.id)  # the kind is asked of the master
    assert same.kind == "command"
    assert same.config["entrypoint"] == ["cat data.txt; ls; echo to-stderr >&2; exit 3"]
    assert task.id in {t.id for t in admin.list_interactive("command")}
    assert task.id in {t.id for t in admin.list_interactive()}
    assert task.id not in {t.id for t in admin.list_interactive("command", users=["nobody-x"])}
    with pytest.raises(TaskEndedError):
        task.wait_ready(timeout=5)


def test_an_argv_command_and_a_kill(admin: Client) -> None:
    task = admin.launch_command(["sleep", "600"], {"resources": {"slots": 0}})
    task.wait_ready(timeout=WAIT_S, interval=0.1)  # a command is ready once it runs
    assert task.state == "RUNNING"
    admin.kill_task(task.id)
    status = task.wait(timeout=WAIT_S, interval=0.1)
    assert status != "exited with code 0"


def test_a_notebook_is_ready_at_its_url(admin: Client) -> None:
    task = admin.launch_notebook({"resources": {"slots": 0}})
    try:
        task.wait_ready(timeout=WAIT_S, interval=0.2)
        assert task.url is not None
        assert task.url.startswith(f"{admin.master}/proxy/{task.id}/lab?token=")
        page = httpx.get(task.url, timeout=30, follow_redirects=True)
        assert page.status_code == 200
        assert "JupyterLab" in page.text
        assert [t.id for t in admin.list_interactive("notebook") if t.id == task.id] == [task.id]
    finally:
        task.kill()
    task.wait(timeout=WAIT_S, interval=0.2)
    assert isinstance(task, InteractiveTask)


def test_unknown_and_invalid(admin: Client) -> None:
    with pytest.raises(NotFoundError):
        admin.get_interactive("00000000-0000-0000-0000-000000000000")
    with pytest.raises(InvalidArgumentError):
        admin.launch_tensorboard()
    with pytest.raises(InvalidArgumentError, match="entrypoint"):
        admin.launch_command([])
