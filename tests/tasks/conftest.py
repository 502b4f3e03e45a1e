"""A stand-in for the master's three report endpoints, and the programs run as subprocesses.

``ReportRecorder`` answers ``POST /api/v1/allocations/{id}/ready``, ``.../waiting`` and ``PUT
/api/v1/notebooks/{task}/report_idle`` with ``{}`` and records each call; tests wait on it with a
deadline. ``task_environ`` is the contract environment an agent gives an interactive task.
``require`` skips a test when JupyterLab or TensorBoard is missing (fails under ``CI=true``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOCATION = "task-1.alloc-1"
TOKEN = "notebook-token-123"
SESSION_TOKEN = "allocation-token"


@dataclass(frozen=True)
class Report:
    method: str
    path: str
    body: Any
    auth: str | None


class ReportRecorder:
    """A tiny HTTP server recording the reports (see the module docstring)."""

    def __init__(self) -> None:
        self.reports: list[Report] = []
        self._changed = threading.Condition()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                auth = self.headers.get("Grpc-Metadata-x-allocation-token")
                body = json.loads(raw) if raw else None
                with recorder._changed:
                    recorder.reports.append(Report(self.command, self.path, body, auth))
                    recorder._changed.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def do_POST(self) -> None:
                self._record()

            def do_PUT(self) -> None:
                self._record()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def paths(self) -> list[str]:
        with self._changed:
            return [r.path for r in self.reports]

    def wait_for(
        self, what: str, predicate: Callable[[list[Report]], bool], timeout: float
    ) -> None:
        """Wait until ``predicate(reports)`` holds; fail naming ``what`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.reports):
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"no {what} within {timeout} s; reports: {self.reports}")
                self._changed.wait(left)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def recorder() -> Iterator[ReportRecorder]:
    server = ReportRecorder()
    try:
        yield server
    finally:
        server.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def task_environ(master: str, task_type: str, port: int, **extra: str) -> dict[str, str]:
    """The contract environment of an interactive task (plus ``extra``)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DET_", "NOTEBOOK_", "TENSORBOARD_", "JUPYTER"))
    }
    env.update(
        {
            "PYTHONPATH": str(ROOT / "src"),
            "DET_MASTER": master,
            "DET_CLUSTER_ID": "cluster-1",
            "DET_AGENT_ID": "agent-1",
            "DET_SLOT_IDS": "[]",
            "DET_TASK_ID": "task-1",
            "DET_ALLOCATION_ID": ALLOCATION,
            "DET_SESSION_TOKEN": SESSION_TOKEN,
            "DET_TASK_TYPE": task_type,
            "DET_SERVICE_PORT": str(port),
        }
    )
    env.update(extra)
    return env


def require(module: str, extra: str) -> None:
    """Skip (fail under CI=true) when ``module`` is not installed."""
    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed (pip install 'stalwart[{extra}]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


class Program:
    """``python -m stalwart.tasks.NAME`` as a subprocess; its output in a file."""

    def __init__(self, name: str, env: dict[str, str], cwd: Path) -> None:
        self.log = cwd / f"{name}.log"
        self._out = self.log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", f"stalwart.tasks.{name}"],
            env=env,
            cwd=cwd,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, then the exit status (fails if it does not end within ``timeout`` s)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the program did not end on SIGTERM:\n{self.output()[-3000:]}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._out.close()


def wait_for_http(
    url: str, timeout: float, program: Program, ok: Callable[[httpx.Response], bool] | None = None
) -> httpx.Response:
    """GET ``url`` until it answers 200 (and ``ok`` holds); fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if program.process.poll() is not None:
            pytest.fail(f"the program exited ({program.process.returncode}):\n{program.output()}")
        try:
            response = httpx.get(url, timeout=5.0)
            if response.status_code == 200 and (ok is None or ok(response)):
                return response
            last = f"{response.status_code} {response.text[:200]}"
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.2)  # a bounded poll of a server that is starting
    pytest.fail(f"{url} did not answer within {timeout} s (last: {last}):\n{program.output()}")
