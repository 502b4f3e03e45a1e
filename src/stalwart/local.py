"""A cluster of real local processes: one master and its agents (what ``stalwart up`` runs).

:class:`LocalCluster` starts ``stalwart master`` and ``stalwart agent`` as child processes of
this Python (``python -m stalwart``), waits until each is ready, and stops them. The master's
state lives in ``home`` (SQLite unless ``db`` is given); each agent keeps its task directories in
``home/agents/<id>``; process output goes to ``home/logs/<name>.log``.

Agents run with ``--kill-on-exit``: stopping the local cluster stops its tasks too (a task
interrupted this way resumes from its latest checkpoint when the cluster runs again).

Readiness: the master is ready when ``GET /info`` answers; an agent when it has synced with the
master once (it writes ``<agent home>/ready``).

Used by ``stalwart up`` / ``stalwart down``, by the integration tests and by the benchmarks.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from stalwart.errors import StalwartError

__all__ = ["LocalCluster", "LocalClusterError", "stop_pid", "wait_for"]


class LocalClusterError(StalwartError):
    """A local master or agent did not start."""

    code = "local_cluster"


def wait_for(check: object, timeout: float, what: str, interval: float = 0.05) -> None:
    """Call ``check()`` until it returns true; LocalClusterError after ``timeout`` seconds."""
    assert callable(check)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise LocalClusterError(f"{what} was not ready after {timeout:g}s")


def stop_pid(pid: int, *, timeout: float = 20.0, sig: int = signal.SIGTERM) -> bool:
    """Send ``sig`` to a process, wait for it to go, SIGKILL it after ``timeout``.

    Returns False when there was no such process.
    """
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            waited, _ = os.waitpid(pid, os.WNOHANG)
            if waited == pid:
                return True
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


@dataclass
class LocalCluster:
    """One master and its agents as child processes (see the module docstring)."""

    home: Path
    port: int = 8080
    host: str = "127.0.0.1"
    db: str | None = None
    master_config: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    detach: bool = False
    master: subprocess.Popen[bytes] | None = None
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The master's URL."""
        return f"http://{self.host}:{self.port}"

    def _spawn(
        self, name: str, args: Sequence[str], prefix: Sequence[str] = ()
    ) -> subprocess.Popen[bytes]:
        logs = self.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{name}.log", "ab") as out:
            return subprocess.Popen(
                [*prefix, sys.executable, "-m", "stalwart", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env},
                start_new_session=self.detach,
            )

    def _log_tail(self, name: str) -> str:
        path = self.home / "logs" / f"{name}.log"
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-15:])

    # -- master ------------------------------------------------------------------------------

    def start_master(self, *, timeout: float = 60.0) -> None:
        """Start the master and wait until it answers."""
        args = ["master", "--home", str(self.home), "--host", self.host, "--port", str(self.port)]
        if self.db:
            args += ["--db", self.db]
        if self.master_config is not None:
            args += ["--config", str(self.master_config)]
        self.master = self._spawn("master", args)
        self._wait_ready("master", self.master, self._master_up, timeout)

    def _master_up(self) -> bool:
        try:
            return httpx.get(f"{self.url}/info", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def kill_master(self) -> None:
        """SIGKILL the master (its agents and tasks keep running)."""
        if self.master is not None:
            self.master.kill()
            self.master.wait()
            self.master = None

    # -- agents ------------------------------------------------------------------------------

    def agent_home(self, agent_id: str) -> Path:
        """Where agent ``agent_id`` keeps its tasks."""
        return self.home / "agents" / agent_id

    def start_agent(
        self,
        agent_id: str = "local",
        *,
        slots: int | None = None,
        pool: str | None = None,
        extra: Sequence[str] = (),
        timeout: float = 60.0,
        master_url: str | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        """Start an agent and wait until it has synced with the master.

        ``master_url``: how the agent reaches the master (default :attr:`url`); ``prefix``: a
        command the agent runs under, e.g. ``ip netns exec NODE`` for an agent on a node of
        its own (tests).
        """
        home = self.agent_home(agent_id)
        ready = home / "ready"
        ready.unlink(missing_ok=True)
        args = [
            "agent",
            "--master",
            master_url or self.url,
            "--id",
            agent_id,
            "--home",
            str(home),
            "--token-file",
            str(self.home / "agent_token"),
            "--kill-on-exit",
            *extra,
        ]
        if slots is not None:
            args += ["--slots", str(slots)]
        if pool is not None:
            args += ["--pool", pool]
        proc = self._spawn(f"agent-{agent_id}", args, prefix)
        self.agents[agent_id] = proc
        self._wait_ready(f"agent {agent_id}", proc, ready.exists, timeout)

    def stop_agent(self, agent_id: str, *, sig: int = signal.SIGTERM) -> None:
        """Stop one agent (SIGKILL: as if its node died)."""
        proc = self.agents.pop(agent_id, None)
        if proc is not None:
            stop_pid(proc.pid, sig=sig)
            proc.wait()

    def _wait_ready(
        self, name: str, proc: subprocess.Popen[bytes], check: object, timeout: float
    ) -> None:
        assert callable(check)

        def ready() -> bool:
            if proc.poll() is not None:
                log_name = "master" if name == "master" else name.replace(" ", "-")
                raise LocalClusterError(
                    f"the {name} exited with code {proc.returncode} while starting:\n"
                    + self._log_tail(log_name)
                )
            return bool(check())

        wait_for(ready, timeout, f"the {name}")

    # -- all ---------------------------------------------------------------------------------

    def stop(self, *, timeout: float = 20.0) -> None:
        """Stop the agents, then the master (SIGTERM, SIGKILL after ``timeout``)."""
        for agent_id in list(self.agents):
            self.stop_agent(agent_id)
        if self.master is not None:
            stop_pid(self.master.pid, timeout=timeout)
            self.master.wait()
            self.master = None

    def pids(self) -> dict[str, int]:
        """Process ids by name (``master``, ``agent-<id>``)."""
        out = {f"agent-{k}": p.pid for k, p in self.agents.items()}
        if self.master is not None:
            out["master"] = self.master.pid
        return out

    def write_state(self) -> Path:
        """Record the detached cluster for ``stalwart down`` (``<home>/up.json``)."""
        path = self.home / "up.json"
        path.write_text(json.dumps({"url": self.url, "pids": self.pids()}), encoding="utf-8")
        return path
