"""``stalwart up`` / ``stalwart down`` as a user runs them: real processes, real ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from stalwart.local import wait_for
from tests.integration.conftest import free_port


def _agents(url: str) -> list[str]:
    with httpx.Client(base_url=url, timeout=10) as client:
        login = client.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
        headers = {"Authorization": f"Bearer {login.json()['token']}"}
        agents = client.get("/api/v1/agents", headers=headers).json()["agents"]
    return [a["id"] for a in agents]


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/info", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_up_runs_a_master_and_an_agent_and_stops_them_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "stalwart", "up", "--home", str(tmp_path), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == f"Stalwart is up at {url} (home: {tmp_path.resolve()})"
        assert _agents(url) == ["local"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "Stopped." in proc.stdout.read()
        assert not _up(url)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_up_detach_and_down(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "stalwart"]
    home = ["--home", str(tmp_path)]
    out = subprocess.run(
        [*cmd, "up", "--detach", "--port", str(port), "--slots", "2", *home],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    assert f"Stalwart is up at {url}" in out.stdout
    try:
        assert _agents(url) == ["local"]
        again = subprocess.run(
            [*cmd, "up", "--detach", "--port", str(free_port()), *home],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 1
        assert "a local cluster already runs from" in again.stderr
    finally:
        down = subprocess.run([*cmd, "down", *home], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0
    assert "Stopped the local cluster" in down.stdout
    wait_for(lambda: not _up(url), 10, "the master to stop")
    assert not (tmp_path / "up.json").exists()
    assert os.listdir(tmp_path / "logs")


def test_up_passes_python_mappings_to_its_agent(tmp_path: Path) -> None:
    """``--python`` reaches the local agent as it is: a mapping to a missing path stops ``up``
    with the agent's own message (and nothing is left running)."""
    port = free_port()
    missing = tmp_path / "no-such-venv"
    cmd = [sys.executable, "-m", "stalwart", "up", "--detach", "--port", str(port)]
    args = ["--home", str(tmp_path / "home"), "--python", f"determinedai/*={missing}"]
    done = subprocess.run(
        [*cmd, *args],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode != 0
    assert "the agent local exited" in done.stderr
    assert f"--python determinedai/*={missing}: {missing} does not exist" in done.stderr
    assert not _up(f"http://127.0.0.1:{port}")
