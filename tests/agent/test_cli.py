"""``stalwart agent`` as a user runs it: option errors as one line, and a real agent process
that registers with a live master and stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stalwart.cli.main import main
from tests.agent.conftest import Master, wait_for
from tests.agent.test_loop import agent_ids


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def no_ambient_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STALWART_AGENT_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_no_token_is_one_readable_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "agent", "--master", "http://127.0.0.1:1")
    assert code == 1
    assert err.startswith("error: no agent token: give --token, STALWART_AGENT_TOKEN")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--master", "ftp://x"], "the master URL must be http(s)://HOST[:PORT]"),
        (["--token-file", "/nope/token"], "cannot read the agent token from /nope/token"),
        (["--python", "nonsense"], "wants IMAGE_PATTERN=PATH"),
        (["--python", "x=/nope/venv"], "/nope/venv does not exist"),
        (["--slots", "2", "--slot-type", "cuda"], "no cuda GPU found"),
    ],
)
def test_bad_options(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    token = [] if "--token-file" in args else ["--token", "t"]
    code, _, err = run(capsys, "agent", "--master", "http://127.0.0.1:1", *token, *args)
    assert code == 1
    assert message in err
    assert "Traceback" not in err


def test_the_token_file_of_the_default_master_home_is_used(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    token_file = tmp_path / "home" / ".stalwart" / "agent_token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text("\n")
    code, _, err = run(capsys, "agent", "--master", "http://127.0.0.1:1")
    assert code == 1
    assert f"the agent token file {token_file} is empty" in err


def test_a_real_agent_registers_and_stops_on_sigterm(master: Master, tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-c",
        "from stalwart.cli.main import main; main()",
        "agent",
        "--master",
        master.url,
        "--id",
        "cli-agent",
        "--slots",
        "2",
        "--token-file",
        str(master.settings.home / "agent_token"),
        "--home",
        str(tmp_path / "agent"),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the agent to register", lambda: "cli-agent" in agent_ids(master))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Stalwart agent 'cli-agent': 2 cpu slot(s)" in out
    assert "SIGTERM: stopping" in err
