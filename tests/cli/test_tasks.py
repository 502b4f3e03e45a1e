"""``stalwart cmd|notebook|shell|tensorboard|task`` against the package's real master and agent.

``cmd run`` streams the output and exits with the command's code; ``notebook start`` reports
the URL under the master, which answers; ``shell start -- echo ok`` prints ``ok`` through
ssh, Stalwart's own tunnel (``stalwart shell tunnel``, the ProxyCommand) and the master's TCP
tunnel to the shell's sshd. The shell test runs the CLI as a subprocess (ssh writes to the real
stdout); without sshd it is skipped, and under CI=true it fails (tests/tasks/test_shell.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from stalwart.cli.command import exit_code_of
from stalwart.cli.shell import proxy_command, ssh_argv, tunnel_url
from stalwart.client import Client
from tests.cli.conftest import Cli, one_error_line
from tests.tasks.test_shell import sshd_installed  # noqa: F401  (the session fixture)

ROOT = Path(__file__).resolve().parents[2]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
WAIT_S = 120.0
NO_SLOTS = ("--config", "resources.slots=0")


def test_cmd_run_streams_the_output_and_exits_with_its_code(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("the uploaded file\n")
    done = cli("cmd", "run", "-c", str(tmp_path), *NO_SLOTS, "--", "cat data.txt; echo oops >&2")
    assert done.code == 0, done.err
    assert done.out == "the uploaded file\n"
    assert "oops" in done.err
    found = UUID.search(done.err)
    assert found is not None, done.err
    command_id = found.group(0)

    failed = cli("cmd", "run", *NO_SLOTS, "--", "sh", "-c", "echo before; exit 7")
    assert failed.code == 7, failed.err
    assert failed.out == "before\n"
    assert "exited with code 7" in failed.err

    listed = cli("cmd", "list")
    assert command_id in listed.out
    assert "exited with code 0" in listed.out
    as_json = json.loads(cli("cmd", "list", "--json").out)
    assert command_id in {c["id"] for c in as_json}
    logs = cli("cmd", "logs", command_id).out
    assert {"the uploaded file", "oops"} <= set(logs.splitlines())  # two streams: any order
    assert "exited with code 0" in logs
    every = cli("task", "list")
    assert command_id in every.out
    assert "Command" in every.out
    assert cli("task", "logs", command_id, "--tail", "1").out == logs.splitlines(True)[-1]


def test_a_detached_command_is_killed(cli: Cli, admin: Client) -> None:
    done = cli("cmd", "run", "-d", *NO_SLOTS, "--", "sleep", "600")
    assert done.code == 0, done.err
    command_id = done.out.strip()
    assert UUID.fullmatch(command_id), done.out
    task = admin.get_interactive(command_id)
    task.wait_ready(timeout=WAIT_S, interval=0.1)
    killed = cli("cmd", "kill", command_id)
    assert killed.code == 0, killed.err
    assert killed.out.strip() == f"Killed command {command_id}."
    assert task.wait(timeout=WAIT_S, interval=0.1) != "exited with code 0"


def test_notebook_start_reports_the_url(cli: Cli, admin: Client) -> None:
    done = cli("notebook", "start", "--no-browser", *NO_SLOTS)
    assert done.code == 0, done.err
    url = done.out.strip()
    found = UUID.search(url)
    assert found is not None, done.out
    notebook_id = found.group(0)
    try:
        assert url.startswith(f"{cli.url}/proxy/{notebook_id}/lab?token="), url
        assert "is running at" in done.err
        page = httpx.get(url, timeout=30, follow_redirects=True)
        assert page.status_code == 200
        assert "JupyterLab" in page.text
        assert cli("notebook", "open", "--no-browser", notebook_id).out.strip() == url
        assert notebook_id in cli("notebook", "list").out
    finally:
        killed = cli("notebook", "kill", notebook_id)
    assert killed.code == 0, killed.err
    admin.get_interactive(notebook_id).wait(timeout=WAIT_S, interval=0.2)
    gone = cli("notebook", "open", "--no-browser", notebook_id)
    assert gone.code == 1
    assert "TERMINATED" in one_error_line(gone.err)


def _stw(cli: Cli, config_home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["XDG_CONFIG_HOME"] = str(config_home)
    for name in ("STALWART_MASTER", "DET_MASTER", "DET_USER", "DET_PASS"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "stalwart", "-m", cli.url, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=WAIT_S,
        check=False,
    )


@pytest.mark.usefixtures("sshd_installed")
def test_shell_start_runs_a_command_through_the_tunnel(
    cli: Cli, admin: Client, tmp_path: Path
) -> None:
    config_home = tmp_path / "xdg"  # the cli fixture's token cache (admin logged in)
    done = _stw(cli, config_home, "shell", "start", *NO_SLOTS, "--", "echo", "ok")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["ok"], done.stdout + done.stderr
    found = UUID.search(done.stderr)
    assert found is not None, done.stderr
    shell_id = found.group(0)
    try:
        code = _stw(cli, config_home, "shell", "open", shell_id, "--", "exit 5")
        assert code.returncode == 5, code.stdout + code.stderr
        shown = _stw(
            cli, config_home, "shell", "open", "--show-ssh-command", shell_id, "--", "echo hi"
        )
        assert shown.returncode == 0, shown.stderr
        command, answer = shown.stdout.splitlines()
        assert answer == "hi"
        assert f"root@{shell_id}" in command
        assert "StrictHostKeyChecking=no" in command
        key = Path(command.split(" -i ", 1)[1].split()[0])
        assert key.stat().st_mode & 0o777 == 0o600  # kept for the printed command
        key.unlink()
        assert shell_id in cli("shell", "list").out
    finally:
        cli("shell", "kill", shell_id)
    admin.get_interactive(shell_id).wait(timeout=WAIT_S, interval=0.2)


def test_tensorboard_start_needs_a_source(cli: Cli) -> None:
    done = cli("tensorboard", "start", "--no-browser")
    assert done.code == 2
    assert "give experiments" in done.err


def test_unknown_tasks_are_one_line(cli: Cli) -> None:
    missing = "00000000-0000-0000-0000-000000000000"
    for args in (("cmd", "kill"), ("task", "logs"), ("notebook", "open"), ("shell", "kill")):
        done = cli(*args, missing)
        assert done.code == 1, args
        one_error_line(done.err)


def test_the_ssh_command_line() -> None:
    argv = ssh_argv(
        master="http://m:8080",
        task_id="abc",
        user="",
        key_path="/tmp/k",
        command=["echo", "ok"],
        tty=False,
        python="/venv/bin/python",
    )
    assert argv[0] == "ssh"
    assert "ProxyCommand=/venv/bin/python -m stalwart shell tunnel http://m:8080 %h" in argv
    assert argv[-4:] == ["-T", "root@abc", "echo", "ok"]
    assert proxy_command("http://m", "/a b/python").startswith("'/a b/python' -m stalwart")
    assert tunnel_url("https://m.example/", "t1") == "wss://m.example/proxy/t1/"
    assert tunnel_url("http://m:8080", "t1") == "ws://m:8080/proxy/t1/"
    assert exit_code_of(3, "exited with code 3") == 3
    assert exit_code_of(None, "killed") == 1
    assert exit_code_of(None, "exited with code 0") == 0
