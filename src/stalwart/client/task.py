"""Interactive tasks as the SDK sees them: commands, notebooks, shells and TensorBoards.

:meth:`Client.launch_command <stalwart.client.Client.launch_command>` (and ``launch_notebook``,
``launch_shell``, ``launch_tensorboard``) return an :class:`InteractiveTask`; it reloads, kills,
waits until its service is ready (:meth:`InteractiveTask.wait_ready`) or until it ended
(:meth:`InteractiveTask.wait`), and follows its logs. Notebooks and TensorBoards are reached
through the master at :attr:`InteractiveTask.url`; a shell's sshd through the master's
TCP-over-WebSocket tunnel at ``/proxy/{id}/`` (``stalwart shell``).

States are shown without ``STATE_``: ``QUEUED``, ``PULLING``, ``STARTING``, ``RUNNING``,
``TERMINATING``, ``TERMINATED``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

from stalwart.client.checkpoint import strip_state
from stalwart.client.errors import TaskEndedError, WaitTimeoutError
from stalwart.client.models import (
    GetTaskResponse,
    TaskLogsResponse,
    V1Allocation,
    V1InteractiveTask,
    V1Task,
)
from stalwart.client.session import Session
from stalwart.errors import InvalidArgumentError

__all__ = ["TASK_KINDS", "InteractiveTask", "TaskKind", "task_logs"]

TaskKind = Literal["command", "notebook", "shell", "tensorboard"]
"""The kinds of interactive task, as their answers' keys name them."""

TASK_KINDS: tuple[TaskKind, ...] = ("command", "notebook", "shell", "tensorboard")


def task_logs(
    session: Session,
    task_id: str,
    *,
    follow: bool = False,
    head: int | None = None,
    tail: int | None = None,
) -> Iterator[TaskLogsResponse]:
    """A task's log lines, oldest first (``GET /api/v1/tasks/{id}/logs``).

    ``head`` N: the first N; ``tail`` N: the last N; ``follow``: keep streaming until the task
    ended and its logs are drained (not with ``head`` or ``tail``).
    """
    if head is not None and tail is not None:
        raise InvalidArgumentError("give head or tail, not both")
    if follow and (head is not None or tail is not None):
        raise InvalidArgumentError("follow cannot be combined with head or tail")
    params: dict[str, Any] = {"follow": "true" if follow else "false"}
    if head is not None:
        params["limit"] = head
    if tail is not None:
        params["limit"] = tail
        params["orderBy"] = "ORDER_BY_DESC"
    lines = (
        TaskLogsResponse.model_validate(item)
        for item in session.stream(f"/api/v1/tasks/{task_id}/logs", params, follow=follow)
    )
    if tail is not None:
        return iter(list(lines)[::-1])  # the master sends the tail newest first
    return lines


class InteractiveTask:
    """One command, notebook, shell or TensorBoard (``id``, ``kind``, ``state``; ``data``
    holds the master's answer, ``config`` the task's config).

    ``data`` is what the master said when this object was made or last :meth:`reload`-ed;
    :meth:`kill` does not reload it.
    """

    def __init__(
        self,
        session: Session,
        kind: TaskKind,
        data: V1InteractiveTask,
        config: dict[str, Any] | None = None,
    ) -> None:
        self._session = session
        self.kind: TaskKind = kind
        self.data = data
        self.config: dict[str, Any] = config or {}
        self.warnings: list[str] = []
        """From a launch: what the master warned about."""

    def __repr__(self) -> str:
        return f"InteractiveTask(kind={self.kind!r}, id={self.id!r}, state={self.state!r})"

    @property
    def id(self) -> str:
        return self.data.id

    @property
    def state(self) -> str:
        """``QUEUED``, ``RUNNING``, ``TERMINATED``, ... (no ``STATE_`` prefix)."""
        return strip_state(self.data.state)

    @property
    def description(self) -> str:
        return self.data.description

    @property
    def owner(self) -> str:
        return self.data.username

    @property
    def exit_status(self) -> str | None:
        """How it ended (``exited with code 0``), None while it runs."""
        return self.data.exit_status

    @property
    def url(self) -> str | None:
        """Notebooks and TensorBoards: the full URL of the service through the master (a
        notebook's carries its token: only its owner and admins are told it)."""
        address = self.data.service_address
        return f"{self._session.master}{address}" if address else None

    @property
    def ended(self) -> bool:
        return self.state == "TERMINATED"

    @classmethod
    def from_answer(cls, session: Session, kind: TaskKind, answer: Any) -> InteractiveTask:
        """From a launch or get answer: ``{<kind>: {...}, "config": {...}}``."""
        if not isinstance(answer, dict) or kind not in answer:
            raise InvalidArgumentError(f"the master's answer holds no {kind}")
        data = V1InteractiveTask.model_validate(answer[kind])
        task = cls(session, kind, data, answer.get("config") or {})
        task.warnings = [str(w) for w in answer.get("warnings") or []]
        return task

    def reload(self) -> InteractiveTask:
        """Read the task again; returns ``self``."""
        answer = self._session.request("GET", f"/api/v1/{self.kind}s/{self.id}")
        fresh = InteractiveTask.from_answer(self._session, self.kind, answer)
        self.data, self.config = fresh.data, fresh.config
        return self

    def kill(self) -> None:
        """Stop the task (its service, or its command, is killed)."""
        self._session.post(f"/api/v1/{self.kind}s/{self.id}/kill")

    def info(self) -> V1Task:
        """The task's allocations (``GET /api/v1/tasks/{id}``): readiness, exit codes."""
        return self._session.get(f"/api/v1/tasks/{self.id}", GetTaskResponse).task

    def _allocation(self) -> V1Allocation | None:
        allocations = self.info().allocations
        return allocations[-1] if allocations else None

    def is_ready(self) -> bool:
        """Whether its newest allocation runs and its service answers."""
        allocation = self._allocation()
        return bool(allocation is not None and allocation.is_ready)

    def exit_code(self) -> int | None:
        """The exit code of its newest allocation (None while it runs, or when it never ran
        or was stopped without one)."""
        allocation = self._allocation()
        return allocation.status_code if allocation is not None else None

    def _wait(
        self,
        done: Callable[[], bool],
        what: str,
        timeout: float | None,
        interval: float,
        on_poll: Callable[[InteractiveTask], None] | None,
    ) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.reload()
            if on_poll is not None:
                on_poll(self)
            if done():
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeoutError(
                    f"{self.kind} {self.id} is still {self.state}, not {what}, after {timeout:g}s",
                    hint=f"read its logs with `stalwart task logs {self.id}`",
                )
            time.sleep(interval)

    def wait_ready(
        self,
        timeout: float | None = None,
        *,
        interval: float = 0.5,
        on_poll: Callable[[InteractiveTask], None] | None = None,
    ) -> InteractiveTask:
        """Block until the task's service is ready (a notebook's JupyterLab answers, a shell's
        sshd listens); returns ``self``. A command is ready once it runs.

        TaskEndedError when it ended first; WaitTimeoutError after ``timeout`` seconds.
        """

        def ready() -> bool:
            if self.ended:
                raise TaskEndedError(
                    f"{self.kind} {self.id} ended before it was ready "
                    f"({self.exit_status or 'terminated'})",
                    hint=f"read its logs with `stalwart task logs {self.id}`",
                )
            return self.state == "RUNNING" and self.is_ready()

        self._wait(ready, "ready", timeout, interval, on_poll)
        return self

    def wait(
        self,
        timeout: float | None = None,
        *,
        interval: float = 0.5,
        on_poll: Callable[[InteractiveTask], None] | None = None,
    ) -> str:
        """Block until the task ended; its exit status (``exited with code 0``...).

        WaitTimeoutError after ``timeout`` seconds (None: no limit).
        """
        self._wait(lambda: self.ended, "TERMINATED", timeout, interval, on_poll)
        return self.exit_status or "terminated"

    def logs(
        self, *, follow: bool = False, head: int | None = None, tail: int | None = None
    ) -> Iterator[TaskLogsResponse]:
        """The task's log lines, oldest first (see :func:`task_logs`)."""
        return task_logs(self._session, self.id, follow=follow, head=head, tail=tail)
