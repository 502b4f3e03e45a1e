"""Fixtures for running the official ``det`` CLI (determined 0.38.1) against a real master.

- ``det_venv``: a separate virtual environment with ``determined==0.38.1`` from PyPI (and torch
  and tensorboard, which its default ``core.init()`` needs), built once
  at ``<repo>/.cache/det-venv`` and reused by later runs (delete the folder to rebuild it). When it
  cannot be built the tests skip, except under ``CI=true``, where they fail.
- ``stalwart_master``: a ``stalwart master`` subprocess on a free loopback port with its own home
  (one per test module); its log is attached to the report of any test that fails while using it.
- ``det``: runs ``det -m <master> ...`` with HOME, XDG_CONFIG_HOME and DET_DEBUG_CONFIG_PATH under
  the test's tmp dir (so the token store never touches the real one), in a new session (no
  controlling terminal: ``getpass`` then reads the password from stdin instead of ``/dev/tty``),
  always with a timeout.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlparse

import httpx
import pytest

from stalwart.local import LocalCluster
from tests.conftest import PORT_OFFSET_VARIABLE

DET_VERSION = "0.38.1"
REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
DET_VENV = CACHE / "det-venv"
_MARKER = DET_VENV / ".stalwart-installed"
_REQUIREMENTS = (f"determined=={DET_VERSION}", "torch==2.13.0", "tensorboard==2.21.0")
"""The official client, and what its default ``core.init()`` needs (a TensorBoard writer)."""
_REQUIREMENT = " ".join(_REQUIREMENTS)

INSTALL_TIMEOUT_S = 900.0
MASTER_START_TIMEOUT_S = 60.0
DET_TIMEOUT_S = 60.0


def _in_ci() -> bool:
    return os.environ.get("CI") == "true"


def _unavailable(reason: str) -> NoReturn:
    """Skip, or fail under CI=true (where every service must be there)."""
    if _in_ci():
        pytest.fail(f"{reason} (required under CI=true)", pytrace=False)
    pytest.skip(reason)


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _build_det_venv() -> None:
    """Create the venv and pip-install the client; the marker is written last."""
    shutil.rmtree(DET_VENV, ignore_errors=True)
    steps = [
        [sys.executable, "-m", "venv", str(DET_VENV)],
        [
            str(DET_VENV / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--timeout",
            "120",
            "--retries",
            "5",
            *_REQUIREMENTS,
        ],
    ]
    for cmd in steps:
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            shutil.rmtree(DET_VENV, ignore_errors=True)
            _unavailable(f"installing {_REQUIREMENT} took over {INSTALL_TIMEOUT_S:.0f} s")
        if done.returncode != 0:
            shutil.rmtree(DET_VENV, ignore_errors=True)
            _unavailable(
                f"cannot install {_REQUIREMENT} into {DET_VENV}: {' '.join(cmd[:4])} exited "
                f"{done.returncode}\n{_tail(done.stdout + done.stderr)}"
            )
    _MARKER.write_text(_REQUIREMENT + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def det_venv() -> Path:
    """The cached venv holding ``determined==0.38.1`` (built on first use, under a file lock)."""
    CACHE.mkdir(exist_ok=True)
    with (CACHE / "det-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent pytest runs wait for one build
        try:
            current = _MARKER.read_text(encoding="utf-8").strip() if _MARKER.exists() else ""
            if current != _REQUIREMENT or not (DET_VENV / "bin" / "det").exists():
                _build_det_venv()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return DET_VENV


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _stalwart_executable() -> str:
    beside = Path(sys.executable).parent / "stalwart"
    if beside.exists():
        return str(beside)
    found = shutil.which("stalwart")
    if found is None:
        pytest.fail("the `stalwart` command is not installed (pip install -e '.[master]')")
    return found


def _clean_env(home: Path) -> dict[str, str]:
    """The environment minus anything that points at a real master, database or token store
    (this worker's task port range stays: see tests/conftest.py)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if (not key.startswith(("DET_", "STALWART_")) or key == PORT_OFFSET_VARIABLE)
        and key != "XDG_CONFIG_HOME"
    }
    env["HOME"] = str(home)
    return env


@dataclass
class MasterProcess:
    """A running ``stalwart master`` subprocess."""

    url: str
    home: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"

    def info(self) -> dict[str, object]:
        body: dict[str, object] = httpx.get(f"{self.url}/info", timeout=10).json()
        return body


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


def _start_master(workdir: Path, extra: Sequence[str] = ()) -> MasterProcess:
    """A master on a free port of ``workdir``, with ``extra`` arguments (``--host``...)."""
    home = workdir / "master-home"
    log_path = workdir / "master.log"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [_stalwart_executable(), "master", "--port", str(port), "--home", str(home), *extra]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_clean_env(workdir),
            cwd=workdir,
        )
    master = MasterProcess(url=url, home=home, log_path=log_path, process=process)
    deadline = time.monotonic() + MASTER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"`{' '.join(cmd)}` exited with {process.returncode} before serving /info:\n"
                f"{master.log()}",
                pytrace=False,
            )
        try:
            if httpx.get(f"{url}/info", timeout=2).status_code == 200:
                return master
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    _stop(process)
    pytest.fail(
        f"the master did not serve {url}/info within {MASTER_START_TIMEOUT_S:.0f} s:\n"
        f"{master.log()}",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def stalwart_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """A real ``stalwart master`` (SQLite under its own home) for the tests of one module."""
    master = _start_master(tmp_path_factory.mktemp("master"))
    try:
        yield master
    finally:
        _stop(master.process)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """Attach the master's log to the report of a failed test that used the master."""
    outcome = yield
    report = outcome.get_result()
    master = getattr(item, "funcargs", {}).get("stalwart_master")
    if report.failed and isinstance(master, MasterProcess):
        report.sections.append((f"stalwart master log ({master.log_path})", master.log()))


@dataclass
class Det:
    """Runs the official ``det`` CLI against one master with an isolated config."""

    executable: Path
    master: MasterProcess
    config_dir: Path
    env: Mapping[str, str]

    def run(
        self,
        *args: str,
        stdin: str = "",
        extra_env: Mapping[str, str] | None = None,
        timeout: float = DET_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        """``det -m <master> ARGS...``; stdin is fed (then EOF) so no prompt can block."""
        return subprocess.run(
            [str(self.executable), "-m", self.master.url, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**self.env, **(extra_env or {})},
            start_new_session=True,  # no controlling tty: getpass reads stdin, never /dev/tty
        )

    def ok(
        self, *args: str, stdin: str = "", extra_env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Like :meth:`run`, asserting exit 0 with the output in the failure message."""
        done = self.run(*args, stdin=stdin, extra_env=extra_env)
        assert done.returncode == 0, describe(done)
        return done

    def login(self, user: str = "admin", password: str = "") -> None:
        """``det user login USER``, answering the password prompt."""
        self.ok("user", "login", user, stdin=password + "\n")


def describe(done: subprocess.CompletedProcess[str]) -> str:
    """A readable account of a finished ``det`` run, for assertion messages."""
    cmd = " ".join(str(part) for part in done.args)
    return (
        f"`{cmd}` exited with {done.returncode}\n--- stdout\n{done.stdout}\n"
        f"--- stderr\n{done.stderr}"
    )


def det_at(det_venv: Path, master: MasterProcess, home: Path) -> Det:
    """A ``det`` with its own token store under ``home`` (see the ``det`` fixture)."""
    config_dir = home / "det-config"
    config_dir.mkdir(parents=True)
    env = _clean_env(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["DET_DEBUG_CONFIG_PATH"] = str(config_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return Det(executable=det_venv / "bin" / "det", master=master, config_dir=config_dir, env=env)


def logged_in_admin(
    det_venv: Path, master: MasterProcess, tmp_path_factory: pytest.TempPathFactory
) -> Det:
    """A ``det`` logged in as ``admin`` (empty password), for a module's ``admin`` fixture."""
    cli = det_at(det_venv, master, tmp_path_factory.mktemp("admin"))
    cli.login("admin", "")
    return cli


def local_agent(
    master: MasterProcess,
    agent_id: str,
    slots: int,
    *,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
) -> Iterator[LocalCluster]:
    """For a module's ``agent`` fixture (``yield from``): a local agent attached to ``master``,
    stopped afterwards."""
    port = urlparse(master.url).port
    assert port is not None
    cluster = LocalCluster(home=master.home, port=port, env=dict(env or {}))
    cluster.start_agent(agent_id, slots=slots, extra=extra)
    try:
        yield cluster
    finally:
        cluster.stop_agent(agent_id)


def sdk_result(
    det_venv: Path,
    cli: Det,
    script: Path,
    *args: str,
    marker: str = "SDK_RESULT",
    timeout: float = 120.0,
) -> Any:
    """Run ``script MASTER_URL ARGS...`` with the det venv's python as ``cli``'s user; asserts
    it exits 0 and returns the JSON it printed after ``marker``."""
    done = subprocess.run(
        [str(det_venv / "bin" / "python"), str(script), cli.master.url, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=dict(cli.env),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, describe(done)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith(f"{marker} "))
    return json.loads(line.removeprefix(f"{marker} "))


@pytest.fixture
def det(det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path) -> Det:
    """The official CLI, with a token store private to this test."""
    return det_at(det_venv, stalwart_master, tmp_path / "det-home")
