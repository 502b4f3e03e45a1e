"""``stalwart master logs [-f] [--tail N] [--json]`` against the package's real master."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from tests.cli.conftest import Cli

LINE = r"^\S+Z \[(INFO|WARNING|ERROR|CRITICAL|DEBUG|TRACE)\]: "
STARTED = "[INFO]: stalwart.master: Stalwart "
WAIT_S = 30.0


def test_master_logs_prints_the_masters_records(cli: Cli) -> None:
    result = cli("master", "logs")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert STARTED in lines[0], result.out  # `stalwart master` keeps its INFO records
    assert "serving cluster" in lines[0]

    tail = cli("master", "logs", "--tail", "1")
    assert tail.code == 0, tail.err
    (last,) = tail.out.splitlines()
    assert re.match(LINE, last), last
    assert all(re.match(LINE, line) for line in lines if line[:4].isdigit()), result.out

    as_json = cli("master", "logs", "--json", "--tail", "2")
    assert as_json.code == 0, as_json.err
    entries = [json.loads(line) for line in as_json.out.splitlines()]
    assert 1 <= len(entries) <= 2
    assert all(set(e) == {"id", "timestamp", "level", "message"} for e in entries)
    assert [e["id"] for e in entries] == sorted(e["id"] for e in entries)
    first = json.loads(cli("master", "logs", "--json").out.splitlines()[0])
    assert first["id"] == 1
    assert first["level"] == "LOG_LEVEL_INFO"

    bad = cli("master", "logs", "--tail", "0")
    assert bad.code == 2  # a usage error


def test_master_logs_is_for_any_logged_in_user(cli: Cli) -> None:
    result = cli("-u", "determined", "master", "logs", "--tail", "1")  # not an admin
    assert result.code == 0, result.err
    assert len(result.out.splitlines()) == 1


def test_master_logs_follow_streams(cli: Cli) -> None:
    """``-f`` prints what the master has and keeps the stream open (a real process, stopped
    by the test)."""
    stalwart = Path(sys.executable).parent / "stalwart"
    process = subprocess.Popen(
        [str(stalwart), "-m", cli.url, "master", "logs", "-f", "--tail", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ),  # the fixture's token cache (XDG_CONFIG_HOME)
    )
    try:
        got: list[str] = []
        reader = threading.Thread(
            target=lambda: got.append(process.stdout.readline() if process.stdout else ""),
            daemon=True,
        )
        reader.start()
        reader.join(WAIT_S)
        assert got, "no line within the wait"
        assert re.match(LINE, got[0]), got
        assert process.poll() is None  # still following
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=WAIT_S)
    assert "Traceback" not in err
