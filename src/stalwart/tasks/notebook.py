"""``python -m stalwart.tasks.notebook``: the JupyterLab of a notebook task.

Contract:

- Starts JupyterLab from the same Python (``sys.executable -m jupyterlab``) in the working
  directory, listening on ``0.0.0.0:$DET_SERVICE_PORT`` under ``/proxy/$DET_TASK_ID/``, with
  ``$DET_NOTEBOOK_TOKEN`` as its token (given through ``JUPYTER_TOKEN``, so it is not on the
  command line, and JupyterLab logs it as ``...``), any origin, root allowed, no browser and
  ``X-Forwarded-*`` headers trusted (the master's proxy sets them).
- JupyterLab's stdout and stderr stay the task's. A reader thread watches stderr for
  ``Jupyter Server <version> is running at`` (:func:`is_ready_line`); then the reporter thread
  calls :meth:`Reporter.ready` once and, every ``STALWART_IDLE_REPORT_SECONDS`` (default 30),
  asks JupyterLab on 127.0.0.1 for its kernels, terminals and sessions and reports
  :meth:`Reporter.idle` as :func:`decide_idle` says for ``NOTEBOOK_IDLE_TYPE`` (Determined's
  ``check_idle.py``). A failed query counts as busy; a failed report is logged and retried at
  the next tick. Reports never hold up JupyterLab's log.
- The program exits with JupyterLab's status and forwards SIGTERM (and SIGINT, SIGHUP) to it.
  Without JupyterLab in this Python it exits 2 with a message naming the Python and the
  ``pip install`` that fixes it; a broken task contract exits 2 with the variables named.
"""

from __future__ import annotations

import enum
import importlib.util
import logging
import os
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from stalwart.core.env import TaskEnvError
from stalwart.tasks._process import Service, exit_code, missing_package, setup_logging
from stalwart.tasks._report import Reporter, service_port

__all__ = [
    "IdleState",
    "IdleType",
    "NotebookSettings",
    "decide_idle",
    "is_ready_line",
    "jupyter_command",
    "main",
]

logger = logging.getLogger("stalwart.tasks.notebook")

DEFAULT_IDLE_REPORT_SECONDS = 30.0
_READY = re.compile(r"Jupyter Server \S+ is running")


class IdleType(enum.Enum):
    """``NOTEBOOK_IDLE_TYPE``: what makes a notebook busy (Determined's three kinds)."""

    KERNELS_OR_TERMINALS = "kernels_or_terminals"
    """Busy while any kernel, terminal or session exists (the default)."""
    KERNEL_CONNECTIONS = "kernel_connections"
    """Busy while any kernel has a client connected (terminals do not count)."""
    ACTIVITY = "activity"
    """Busy while a kernel is executing or any kernel or terminal showed new activity."""

    @classmethod
    def parse(cls, text: str | None) -> IdleType:
        """The type ``text`` names (any case); the default, with a warning, for anything else."""
        if not text:
            return cls.KERNELS_OR_TERMINALS
        try:
            return cls(text.strip().lower())
        except ValueError:
            logger.warning("unknown NOTEBOOK_IDLE_TYPE %r, using kernels_or_terminals", text)
            return cls.KERNELS_OR_TERMINALS


@dataclass
class IdleState:
    """What :func:`decide_idle` remembers between ticks (``activity`` mode)."""

    last_activity: str | None = None


def decide_idle(
    mode: IdleType,
    kernels: Sequence[Mapping[str, Any]],
    terminals: Sequence[Mapping[str, Any]],
    sessions: Sequence[Mapping[str, Any]],
    state: IdleState,
) -> bool:
    """Whether the notebook is idle now, from JupyterLab's ``/api/kernels``, ``/api/terminals``
    and ``/api/sessions`` answers (``state`` is updated in ``activity`` mode)."""
    if mode is IdleType.KERNELS_OR_TERMINALS:
        return not kernels and not terminals and not sessions
    if mode is IdleType.KERNEL_CONNECTIONS:
        return all(int(k.get("connections") or 0) == 0 for k in kernels)
    previous = state.last_activity
    stamps = [str(x["last_activity"]) for x in [*kernels, *terminals] if x.get("last_activity")]
    if stamps:
        state.last_activity = max(stamps)  # ISO 8601 in UTC: the text order is the time order
    executing = any(k.get("execution_state") == "busy" for k in kernels)
    return not executing and state.last_activity == previous


def is_ready_line(line: str) -> bool:
    """Whether a JupyterLab log line says its server answers (``Jupyter Server 2.x is
    running at:``)."""
    return _READY.search(line) is not None


@dataclass(frozen=True)
class NotebookSettings:
    """What the program reads from the task contract beyond :class:`TaskEnv`."""

    port: int
    task_id: str
    token: str
    idle_type: IdleType = IdleType.KERNELS_OR_TERMINALS
    idle_report_s: float = DEFAULT_IDLE_REPORT_SECONDS
    root_dir: Path = field(default_factory=Path.cwd)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], task_id: str) -> NotebookSettings:
        """Read ``DET_SERVICE_PORT``, ``DET_NOTEBOOK_TOKEN``, ``NOTEBOOK_IDLE_TYPE`` and
        ``STALWART_IDLE_REPORT_SECONDS`` (:class:`TaskEnvError` naming what is wrong)."""
        port = service_port(environ)
        token = environ.get("DET_NOTEBOOK_TOKEN", "")
        if not token:
            raise TaskEnvError(
                "DET_NOTEBOOK_TOKEN is not set: the master gives every notebook a token "
                "(JupyterLab is not started without one)"
            )
        text = environ.get("STALWART_IDLE_REPORT_SECONDS") or str(DEFAULT_IDLE_REPORT_SECONDS)
        try:
            interval = float(text)
        except ValueError:
            interval = -1.0
        if not interval > 0:
            raise TaskEnvError(f"STALWART_IDLE_REPORT_SECONDS is {text!r}, not a positive number")
        return cls(
            port=port,
            task_id=task_id,
            token=token,
            idle_type=IdleType.parse(environ.get("NOTEBOOK_IDLE_TYPE")),
            idle_report_s=interval,
        )

    @property
    def base_url(self) -> str:
        return f"/proxy/{self.task_id}/"


def jupyter_command(settings: NotebookSettings, python: str = sys.executable) -> list[str]:
    """The JupyterLab command line (the token travels in ``JUPYTER_TOKEN``, not here)."""
    return [
        python,
        "-m",
        "jupyterlab",
        "--ServerApp.ip=0.0.0.0",
        f"--ServerApp.port={settings.port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={settings.base_url}",
        "--ServerApp.allow_origin=*",
        "--ServerApp.allow_root=True",
        "--ServerApp.open_browser=False",
        "--ServerApp.trust_xheaders=True",
        f"--ServerApp.root_dir={settings.root_dir}",
    ]


class _Reports(threading.Thread):
    """Ready once JupyterLab answers, then idle reports every interval."""

    def __init__(self, reporter: Reporter, settings: NotebookSettings) -> None:
        super().__init__(name="stalwart-notebook-reports", daemon=True)
        self.reporter = reporter
        self.settings = settings
        self.server_up = threading.Event()
        self.stopping = threading.Event()
        self._state = IdleState()
        self._api = f"http://127.0.0.1:{settings.port}{settings.base_url}api"

    def on_line(self, line: str) -> None:
        if not self.server_up.is_set() and is_ready_line(line):
            self.server_up.set()

    def run(self) -> None:
        while not self.server_up.wait(0.5):
            if self.stopping.is_set():
                return
        try:
            self.reporter.ready()
            logger.info("JupyterLab is ready; told the master")
        except Exception as exc:
            logger.error("could not tell the master that JupyterLab is ready: %s", exc)
        headers = {"Authorization": f"token {self.settings.token}"}
        with httpx.Client(headers=headers, timeout=10.0) as client:
            while not self.stopping.wait(self.settings.idle_report_s):
                idle = self._is_idle(client)
                try:
                    self.reporter.idle(idle)
                except Exception as exc:
                    logger.warning("could not report idle=%s to the master: %s", idle, exc)

    def _is_idle(self, client: httpx.Client) -> bool:
        try:
            answers = []
            for name in ("kernels", "terminals", "sessions"):
                response = client.get(f"{self._api}/{name}")
                response.raise_for_status()
                answers.append(response.json())
        except (httpx.HTTPError, ValueError) as exc:
            logger.warning("cannot ask JupyterLab for its kernels (counted as busy): %s", exc)
            return False
        kernels, terminals, sessions = answers
        return decide_idle(self.settings.idle_type, kernels, terminals, sessions, self._state)


def main(environ: Mapping[str, str] | None = None) -> int:
    """Run the notebook task's JupyterLab; its exit status (see the module contract)."""
    env = os.environ if environ is None else environ
    setup_logging()
    try:
        reporter = Reporter.from_environ(env)
        settings = NotebookSettings.from_environ(env, reporter.task.task_id)
    except TaskEnvError as exc:
        print(f"stalwart notebook: {exc}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("jupyterlab") is None:
        print(
            f"stalwart notebook: {missing_package('JupyterLab', 'jupyterlab', 'notebook')}",
            file=sys.stderr,
        )
        return 2
    child_env = {**env, "JUPYTER_TOKEN": settings.token}
    reports = _Reports(reporter, settings)
    service = Service(jupyter_command(settings), env=child_env, on_line=reports.on_line)
    logger.info("started JupyterLab (pid %d) on port %d", service.process.pid, settings.port)
    reports.start()
    try:
        with service.forwarding_signals(reports.stopping.set):
            code = service.wait()
    finally:
        reports.stopping.set()
        code = service.stop()
        reports.join(5)
        reporter.close()
    logger.info("JupyterLab exited with status %d", code)
    return exit_code(code)


if __name__ == "__main__":
    sys.exit(main())
