"""How an interactive task tells the master about itself: ready, waiting, idle.

One door for every program in :mod:`stalwart.tasks`. It authenticates with the allocation
token (``DET_SESSION_TOKEN``) and retries through the Core API session
(:class:`stalwart.core._client.Session`: 5xx and unreachable masters are retried, 4xx raise).

- :meth:`Reporter.ready`: ``POST /api/v1/allocations/{id}/ready``; the service answers now
  (the task's ``isReady`` turns true, the CLI stops waiting, the proxy forwards).
- :meth:`Reporter.waiting`: ``POST /api/v1/allocations/{id}/waiting``; the service runs but
  has nothing to show yet (a TensorBoard waiting for event files).
- :meth:`Reporter.idle`: ``PUT /api/v1/notebooks/{task_id}/report_idle`` with ``{"idle": b}``
  (Determined's path); the master ends a notebook idle for longer than its ``idle_timeout``.
"""

from __future__ import annotations

from collections.abc import Mapping

from stalwart.core._client import Session
from stalwart.core.env import TaskEnv, TaskEnvError

__all__ = ["Reporter", "service_port"]


def service_port(environ: Mapping[str, str]) -> int:
    """``DET_SERVICE_PORT`` as an int; :class:`TaskEnvError` when it is missing or not a port."""
    text = environ.get("DET_SERVICE_PORT", "")
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise TaskEnvError(
            f"DET_SERVICE_PORT is {text!r}, not a port: this program runs inside an "
            "interactive task started by the Stalwart master"
        )
    return int(text)


class Reporter:
    """Reports of one allocation to its master (see the module docstring)."""

    def __init__(self, task: TaskEnv, session: Session | None = None) -> None:
        self.task = task
        self.session = session or Session(task.master_url, task.session_token)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Reporter:
        """The reporter of the task this process runs in; :class:`TaskEnvError` outside one."""
        task = TaskEnv.from_environ(environ)
        if task is None:
            raise TaskEnvError(
                "DET_MASTER and DET_ALLOCATION_ID are not set: this program runs inside an "
                "interactive task started by the Stalwart master"
            )
        return cls(task)

    def ready(self, os_user: str | None = None) -> None:
        """The service answers (idempotent); a shell names the OS user its sshd logs in."""
        body = {"stalwartOsUser": os_user} if os_user else None
        self.session.post(f"/api/v1/allocations/{self.task.allocation_id}/ready", body)

    def waiting(self) -> None:
        """The service runs but waits for something to show (idempotent)."""
        self.session.post(f"/api/v1/allocations/{self.task.allocation_id}/waiting")

    def idle(self, idle: bool) -> None:
        """Whether the notebook is idle now."""
        self.session.request(
            "PUT", f"/api/v1/notebooks/{self.task.task_id}/report_idle", body={"idle": idle}
        )

    def close(self) -> None:
        """Close the session (idempotent)."""
        self.session.close()
