"""What every benchmark shares: options, measurements, a master subprocess, an HTTP client.

The load side uses the standard library's ``http.client`` over keep-alive connections: it costs
far less CPU per request than an async client, which matters when the clients share the
machine's cores with the server they measure.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import math
import os
import platform
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "RESULTS_DIR",
    "BenchError",
    "HttpClient",
    "Measurement",
    "Options",
    "latency_stats",
    "machine_info",
    "print_table",
    "running_master",
    "write_results",
]

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"


class BenchError(RuntimeError):
    """A benchmark could not run (the message says why)."""


@dataclass(frozen=True)
class Options:
    """Command-line options every benchmark receives."""

    quick: bool = False
    clients: int = 8
    workdir: Path | None = None
    keep: bool = False
    databases: tuple[str, ...] = ("sqlite", "postgresql")
    """The databases of the benchmarks that run on several (``--db``)."""
    trials: int | None = None
    """``b1``'s number of trials per system (``--trials``; None: its default)."""
    peers: tuple[str, ...] | None = None
    """``b1``'s peers (``--peer``, repeatable; None: its default for the number of trials)."""
    users: tuple[int, ...] | None = None
    """``b3``'s numbers of locust users (``--users``, repeatable; None: 25 and 100)."""
    workers: tuple[int, ...] | None = None
    """``b3``'s master worker processes (``--workers``, repeatable; None: 1 and 2)."""


@dataclass
class Measurement:
    """One number a benchmark produced, with its target (if any) and raw statistics."""

    name: str
    value: float | None
    unit: str
    target: str | None = None
    passed: bool | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def percentile(sorted_samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of already sorted samples, by linear interpolation."""
    if not sorted_samples:
        return math.nan
    pos = (len(sorted_samples) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(sorted_samples) - 1)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (pos - low)


def latency_stats(samples_s: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/mean/max in milliseconds, and the sample count."""
    ordered = sorted(samples_s)
    if not ordered:
        return {"count": 0}
    return {
        "count": len(ordered),
        "p50_ms": percentile(ordered, 0.50) * 1e3,
        "p95_ms": percentile(ordered, 0.95) * 1e3,
        "p99_ms": percentile(ordered, 0.99) * 1e3,
        "mean_ms": sum(ordered) / len(ordered) * 1e3,
        "max_ms": ordered[-1] * 1e3,
    }


class HttpClient:
    """One keep-alive HTTP/1.1 connection to ``127.0.0.1:port`` (reconnects once on a drop)."""

    def __init__(self, port: int, headers: Mapping[str, str] | None = None) -> None:
        self._port = port
        self._headers = dict(headers or {})
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request; return its status and body."""
        status, _, raw = self.exchange(method, path, body)
        return status, raw

    def exchange(
        self, method: str, path: str, body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request; return its status, headers (lower-case names) and body."""
        for attempt in (1, 2):
            try:
                self._conn.request(method, path, body=body, headers=self._headers)
                resp = self._conn.getresponse()
                headers = {k.lower(): v for k, v in resp.getheaders()}
                return resp.status, headers, resp.read()
            except (ConnectionError, http.client.HTTPException):
                self._conn.close()
                self._conn = http.client.HTTPConnection("127.0.0.1", self._port, timeout=30)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
        """Send JSON (if any); return the status and the decoded body (None if not JSON)."""
        body = None if payload is None else json.dumps(payload).encode()
        status, raw = self.request(method, path, body)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    def close(self) -> None:
        self._conn.close()


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
        raise BenchError("the `stalwart` command is not installed (pip install -e '.[master]')")
    return found


@dataclass
class MasterProcess:
    """A running ``stalwart master`` (uvicorn) subprocess."""

    port: int
    home: Path
    log_path: Path

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@contextmanager
def running_master(
    home: Path, *, start_timeout_s: float = 60.0, extra_args: Sequence[str] = ()
) -> Iterator[MasterProcess]:
    """Run ``stalwart master --home HOME [EXTRA_ARGS]`` on a free loopback port until the
    block ends (``extra_args``: e.g. ``["--db", url]``)."""
    port = _free_port()
    log_path = home.parent / "master.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STALWART_", "DET_"))}
    cmd = [_stalwart_executable(), "master", "--port", str(port), "--home", str(home)]
    cmd += list(extra_args)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    master = MasterProcess(port=port, home=home, log_path=log_path)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if proc.poll() is not None:
                raise BenchError(f"the master exited with {proc.returncode}:\n{master.log_tail()}")
            try:
                client = HttpClient(port)
                status, _ = client.request("GET", "/info")
                client.close()
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BenchError(f"the master did not start:\n{master.log_tail()}")
            time.sleep(0.1)
        yield master
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def _git_commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout.strip()
    return done.stdout.strip() + ("-dirty" if dirty else "")


def machine_info() -> dict[str, Any]:
    """Where the numbers were measured."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "git_commit": _git_commit(),
    }


def write_results(
    benchmark: str, options: Options, measurements: Sequence[Measurement], extra: dict[str, Any]
) -> Path:
    """Write ``bench/results/<benchmark>-<UTC time>.json``; return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    path = RESULTS_DIR / f"{benchmark}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    payload = {
        "benchmark": benchmark,
        "finished_at": now.isoformat(),
        "machine": machine_info(),
        "options": {"quick": options.quick, "clients": options.clients},
        **extra,
        "measurements": [asdict(m) for m in measurements],
    }
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def print_table(benchmark: str, measurements: Sequence[Measurement]) -> None:
    """A plain-text table: measurement, value, unit, target, verdict, note."""
    rows = [("measurement", "value", "unit", "target", "ok", "note")]
    for m in measurements:
        verdict = {True: "yes", False: "NO", None: "-"}[m.passed]
        rows.append((m.name, _fmt(m.value), m.unit, m.target or "-", verdict, m.note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    print(f"\n== {benchmark}")
    for i, row in enumerate(rows):
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        print("  ".join(cells) + ("  " + row[-1] if row[-1] else ""))
        if i == 0:
            print("  ".join("-" * width for width in widths))
