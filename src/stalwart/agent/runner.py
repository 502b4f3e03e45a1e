"""Runners start a container's process and watch it: the :class:`Runner` interface and
:class:`ProcessRunner` (a local process group).

Output goes to ``stdout.log`` / ``stderr.log`` in the container directory, and two reader
threads per container tail those files and hand complete lines to the sink. Files rather than
pipes: a container outlives the agent (``stalwart agent`` stops without ``--kill-on-exit``),
and a pipe whose reader is gone would kill it with EPIPE at its next print.

Where the node allows it, :class:`ProcessRunner` starts each task in a private mount namespace
(:mod:`stalwart.agent.isolation`) so that the official harness finds its fixed paths.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal, Protocol

from stalwart.agent.hooks import with_startup_hooks
from stalwart.agent.identity import (
    HOME_DIR,
    IdentityError,
    TaskIdentity,
    allow_traversal,
    can_run,
    hand_over,
    identity_for,
)
from stalwart.agent.isolation import (
    FALLBACK_TASK_NOTE,
    RUN_DIR_TARGET,
    FixedPaths,
    MountNamespaces,
    config_seen_inside,
    fallback_links,
    task_binds,
    uses_official_harness,
)
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.warm import WarmStarts
from stalwart.agent.workspace import Workspace
from stalwart.errors import StalwartError

__all__ = [
    "PID_FILE",
    "ChildProcess",
    "ContainerStartError",
    "Handle",
    "LineSplitter",
    "OutputSink",
    "ProcessRunner",
    "Runner",
    "Stdtype",
    "TaskProcess",
]

Stdtype = Literal["stdout", "stderr"]
OutputSink = Callable[[str, Stdtype], None]
"""Receives one complete line (ending in ``\\n``) and the stream it came from."""

_LINE_END = re.compile(rb"\r\n|\r|\n")
UNRUNNABLE_PYTHON = (
    "NOTE: this task runs as {who.name} (uid {who.uid}), who cannot run the agent's Python "
    "{python} (it, or a directory above it, is closed to that user), so `python3` is whatever "
    "else is on PATH. Install the Python tasks use where every task user can run it (e.g. "
    "under /opt), or map the task's image to such a Python with the agent's --python.\n"
)
"""The line a task run as another user gets first when it cannot run the agent's Python."""
_TASK_UMASK = 0o022
"""Tasks create files as a shell would (the agent itself runs with 0077)."""
_TAIL_INTERVAL_S = 0.05
_DRAIN_TIMEOUT_S = 5.0
_JOIN_S = 0.02


class ContainerStartError(StalwartError):
    """A container could not be started (bad command, missing executable...)."""

    code = "container_start_failed"


class LineSplitter:
    """Splits a byte stream into lines on ``\\n``, ``\\r`` or ``\\r\\n``.

    Each line is decoded as UTF-8 (invalid bytes replaced) and ends in ``\\n``. A line longer
    than ``max_line`` bytes is cut into pieces of that size.
    """

    def __init__(self, max_line: int = 64 * 1024) -> None:
        self._buf = b""
        self._skip_lf = False
        self._max = max_line

    def feed(self, data: bytes) -> list[str]:
        """The lines completed by ``data``."""
        if self._skip_lf and data.startswith(b"\n"):
            data = data[1:]
        self._skip_lf = False
        if not data:
            return []
        buf = self._buf + data
        lines: list[str] = []
        start = 0
        for match in _LINE_END.finditer(buf):
            if match.group() == b"\r" and match.end() == len(buf):
                self._skip_lf = True  # a "\r\n" may be split across two chunks
            lines.append(buf[start : match.start()].decode("utf-8", "replace") + "\n")
            start = match.end()
        rest = buf[start:]
        while len(rest) > self._max:
            lines.append(rest[: self._max].decode("utf-8", "replace") + "\n")
            rest = rest[self._max :]
        self._buf = rest
        return lines

    def finish(self) -> list[str]:
        """The last, unterminated line, if any."""
        rest, self._buf = self._buf, b""
        return [rest.decode("utf-8", "replace") + "\n"] if rest else []


class TaskProcess(Protocol):
    """A container's main process, however it was started: a child of the agent
    (:class:`ChildProcess`) or forked by a warm Python
    (:class:`~stalwart.agent.warm.ForkedProcess`)."""

    @property
    def pid(self) -> int:
        """Its pid, which is also its process group's and session's id."""

    def has_exited(self) -> bool:
        """Whether it has exited (never blocks; a child of the agent is not reaped yet)."""

    def wait_exited(self) -> None:
        """Block until it has exited (a child of the agent is not reaped yet)."""

    def reap(self) -> int:
        """Its exit code (negative: killed by that signal), once :meth:`has_exited`; whatever
        is left of its process group is killed before the process is reaped."""

    @property
    def reaped(self) -> bool:
        """Whether it was reaped (its pid and group id may then be reused)."""


@dataclass(frozen=True)
class ChildProcess:
    """A container's main process started by the agent itself (:class:`TaskProcess`)."""

    popen: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid

    def has_exited(self) -> bool:
        try:
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
            return os.waitid(os.P_PID, self.pid, flags) is not None
        except ChildProcessError:  # reaped already: it has exited
            return True

    def wait_exited(self) -> None:
        with contextlib.suppress(ChildProcessError, OSError):  # reaped already: it has exited
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)

    def reap(self) -> int:
        # The main process is a zombie: its group id cannot be reused yet.
        _signal_group(self.pid, signal.SIGKILL)
        return self.popen.wait()

    @property
    def reaped(self) -> bool:
        return self.popen.returncode is not None


@dataclass(eq=False)
class Handle:
    """A started container: its main process and the threads reading its output.

    ``name`` is the runner's name for it (for ContainerRunner, the engine's container name).
    """

    name: str
    proc: TaskProcess
    readers: list[threading.Thread] = field(default_factory=list)
    exited: threading.Event = field(default_factory=threading.Event)
    exit_code: int | None = None
    exit_seen: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def pid(self) -> int:
        return self.proc.pid


class Runner(ABC):
    """Starts and watches containers. Contract:

    - :meth:`start` launches the container and returns at once with a handle; it never waits
      for the container to finish. It raises ContainerStartError (leaving nothing running)
      when the container cannot start. From then on, ``sink`` receives every output line, in
      order per stream, from runner threads.
    - :meth:`poll` never blocks: None while the container runs, else its exit code (negative:
      killed by that signal). It reports the exit only after the output has been handed to the
      sink (or a few seconds of draining passed). After an exit it keeps returning the code.
    - :meth:`terminate` asks the container to stop (SIGTERM); :meth:`kill` forces it (SIGKILL).
      Both return at once, are idempotent, and do nothing once the container has exited.
    - Runners are used from two threads, never more: the daemon's starter calls
      :meth:`needs_image`, :meth:`official_harness` and :meth:`start`; its loop thread calls
      :meth:`poll`, :meth:`terminate` and :meth:`kill` (on handles :meth:`start` returned).
      State shared by both groups must be safe for that; within a group, no locking is needed.
    - ``on_exit``, when set, is called from a runner thread soon after a container's main
      process exits: a hint to :meth:`poll` now rather than at the next tick (it must be
      thread-safe and must not block).
    - Runners that start images (:class:`~stalwart.agent.containers.ContainerRunner`) say so
      with :meth:`needs_image`; the caller then runs :meth:`pull_image` in a thread of its own
      before :meth:`start` (a pull may take minutes). :meth:`pull_image` is thread-safe.
    """

    on_exit: Callable[[], None] | None = None

    def official_harness(self, spec: TaskSpec, workspace: Workspace) -> bool:
        """Whether the task is written for Determined's official harness (default: no)."""
        return False

    def needs_image(self, spec: TaskSpec) -> bool:
        """Whether :meth:`pull_image` must run before :meth:`start` (default: never)."""
        return False

    def pull_image(self, spec: TaskSpec, sink: OutputSink) -> float | None:
        """Make sure the container's image is on the node (blocking; any thread): the seconds
        spent pulling it, or None when nothing was pulled. Output lines go to ``sink``. Raises
        ContainerStartError when the image cannot be had."""
        return None

    @abstractmethod
    def start(self, spec: TaskSpec, workspace: Workspace, sink: OutputSink) -> Handle:
        """Launch the container (see the class contract)."""

    @abstractmethod
    def poll(self, handle: Handle) -> int | None:
        """The exit code once exited and drained, else None."""

    @abstractmethod
    def terminate(self, handle: Handle) -> None:
        """SIGTERM the container."""

    @abstractmethod
    def kill(self, handle: Handle) -> None:
        """SIGKILL the container."""


def _tail(path: Path, stdtype: Stdtype, sink: OutputSink, exited: threading.Event) -> None:
    """Hand the lines of a growing file to ``sink`` until the writer exited and it is read."""
    splitter = LineSplitter()
    with path.open("rb") as stream:
        while True:
            chunk = stream.read(64 * 1024)
            if chunk:
                for line in splitter.feed(chunk):
                    sink(line, stdtype)
            elif exited.is_set():
                rest = stream.read()
                if not rest:
                    break
                for line in splitter.feed(rest):
                    sink(line, stdtype)
            else:
                exited.wait(_TAIL_INTERVAL_S)
    for line in splitter.finish():
        sink(line, stdtype)


def _await_exit(proc: TaskProcess, hint: Callable[[], None]) -> None:
    """Block until ``proc`` exits (without reaping it), then call ``hint``."""
    proc.wait_exited()
    hint()


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


PID_FILE = "pid"
"""``<container dir>/pid``: ``<pid> <start time>`` of a ProcessRunner task (see kill_leftovers)."""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or
    None when there is no such process (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def kill_leftovers(home: Path) -> list[str]:
    """SIGKILL the process groups that an earlier life of this agent left running.

    A restarted agent does not adopt the tasks of its previous life (its registry is in
    memory), and the master fails and reschedules them, so a leftover could only ever be a
    second copy of a trial. Each ProcessRunner task wrote ``<home>/tasks/*/rank-*/pid``; a group
    is killed only when its leader is the very process recorded (same pid and start time).
    Returns the ``<allocation>/rank-<r>`` names of what was killed.
    """
    killed: list[str] = []
    for pid_file in sorted((home / "tasks").glob(f"*/rank-*/{PID_FILE}")):
        try:
            pid_text, _, started = pid_file.read_text(encoding="ascii").partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if pid > 1 and started.strip() and _start_time(pid) == started.strip():
            _signal_group(pid, signal.SIGKILL)
            killed.append(f"{pid_file.parent.parent.name}/{pid_file.parent.name}")
    return killed


def _check_executable(command: str, cwd: Path, env: dict[str, str]) -> None:
    """ContainerStartError when ``command`` cannot be found, as Popen would raise for it (the
    namespace wrapper would only exit 127: a start failure must stay one)."""
    if os.sep in command:
        found = os.access(cwd / command, os.X_OK)
    else:
        found = shutil.which(command, path=env.get("PATH", os.defpath)) is not None
    if not found:
        raise ContainerStartError(f"cannot start {command!r}: No such file or directory")


class ProcessRunner(Runner):
    """Runs ``TaskSpec.argv`` as a local process in its own session and process group.

    The working directory is the workspace's ``workdir`` and the environment is the
    workspace's. Signals go to the whole group. When the main process exits, whatever is left
    of its group is killed (as a container's processes die with it).

    ``namespaces`` (from :func:`stalwart.agent.isolation.probe`): start each task written for
    the official harness (:func:`~stalwart.agent.isolation.uses_official_harness`, decided once
    per experiment; every task with ``every_task``) through nsexec in its own mount namespace
    (nsexec execs the command, so the pid, group, signals and exit code are the command's).
    Other tasks run in the agent's namespace. When ``no_namespace_reason`` is set (the node
    gives no namespaces), each task written for the official harness gets a note saying why at
    the top of its stderr and runs through ``fixed_paths`` (:mod:`stalwart.agent.fixedpaths`):
    one such task at a time per node, with ``/run/determined`` and ``/determined_shared_fs``
    linked to its files.

    ``task_user``: who runs the tasks of non-admins on a root agent
    (:func:`stalwart.agent.identity.identity_for`). A task that runs as another user owns its
    files (:func:`~stalwart.agent.identity.hand_over`), gets ``HOME`` in its run directory, and,
    where namespaces exist, always runs in one, reaching its files only through
    ``/run/determined`` (the agent's home stays closed to it); without namespaces it is started
    as that user directly, and the agent's home is opened for passing through.

    ``warm``: fork the tasks that allow it from a warm Python that has the harness imported
    (:mod:`stalwart.agent.warm`: a bare ``python SCRIPT`` or ``python -m MODULE`` with no
    hook, wrapper or other user); the others, and every task while no warm Python is ready,
    start as new processes.
    """

    namespaces: MountNamespaces | None = None
    no_namespace_reason: str | None = None
    warm: WarmStarts | None = None

    def __init__(
        self,
        namespaces: MountNamespaces | None = None,
        no_namespace_reason: str | None = None,
        *,
        every_task: bool = False,
        fixed_paths: FixedPaths | None = None,
        task_user: TaskIdentity | None = None,
        warm: WarmStarts | None = None,
    ) -> None:
        self.task_user = task_user
        self.warm = warm
        self.namespaces = namespaces
        self.no_namespace_reason = no_namespace_reason
        self.fixed_paths = fixed_paths or FixedPaths()
        self.every_task = every_task
        self._official: dict[str, bool] = {}  # experiment (or task) -> uses the official harness

    def official_harness(self, spec: TaskSpec, workspace: Workspace) -> bool:
        """Whether the task is written for the official harness (a model definition never
        changes within an experiment: trial tasks are ``<experimentId>.<requestId>``)."""
        key = spec.task_id.split(".", 1)[0] if "." in spec.task_id else spec.task_id
        if key not in self._official:
            self._official[key] = uses_official_harness(spec.argv, workspace.workdir)
        return self._official[key]

    def identity(self, spec: TaskSpec) -> TaskIdentity | None:
        """Who runs the task (None: the agent's own user); ContainerRunner leaves it to the
        engine. Raises ContainerStartError when its linked user is unknown here."""
        try:
            return identity_for(spec, self.task_user)
        except IdentityError as exc:
            raise ContainerStartError(str(exc)) from None

    def wrapper(
        self, spec: TaskSpec, workspace: Workspace, identity: TaskIdentity | None
    ) -> Literal["namespace", "fixed_paths"] | None:
        """Which wrapper starts the task: a private mount namespace (every task with
        ``every_task``, every task run as another user, and tasks written for the official
        harness), the fixed-paths fallback (tasks written for the official harness, on a node
        without namespaces), or none. The wrappers become ``identity`` themselves."""
        if not spec.argv:
            return None
        if self.namespaces is not None and (
            self.every_task or identity is not None or self.official_harness(spec, workspace)
        ):
            return "namespace"
        if self.no_namespace_reason is not None and self.official_harness(spec, workspace):
            return "fixed_paths"
        return None

    def command(
        self, spec: TaskSpec, workspace: Workspace, identity: TaskIdentity | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment of the process to start (ContainerRunner overrides it):
        the spec's command after its startup hooks (:mod:`stalwart.agent.hooks`).

        With ``identity``, the task's files are handed over to it first; without a
        :meth:`wrapper`, :meth:`start` starts the process as that user."""
        argv = with_startup_hooks(spec.argv, workspace.run_dir, workspace.workdir)
        env = dict(workspace.env)
        wrapper = self.wrapper(spec, workspace, identity)
        if wrapper is not None and argv == spec.argv:  # a hook may change PATH: bash says 127
            _check_executable(argv[0], workspace.workdir, env)
        if identity is not None:
            env.update(USER=identity.name, LOGNAME=identity.name)
            env["HOME"] = str(workspace.run_dir / HOME_DIR)
            if not can_run(workspace.python, identity):
                with workspace.stderr_path.open("a", encoding="utf-8") as stream:
                    stream.write(UNRUNNABLE_PYTHON.format(python=workspace.python, who=identity))
        if wrapper == "namespace":
            assert self.namespaces is not None
            try:
                binds = task_binds(spec, workspace)
                if identity is not None:
                    hand_over(workspace.run_dir, workspace.workdir, identity)
            except OSError as exc:
                raise ContainerStartError(f"cannot prepare the task's mounts: {exc}") from exc
            if identity is None:
                return self.namespaces.wrap(argv, binds), env
            # The task reaches its files only through the namespace's fixed paths.
            inside = f"{RUN_DIR_TARGET}/workdir"
            env.update(
                DET_RUN_DIR=RUN_DIR_TARGET, DET_WORKDIR=inside, HOME=f"{RUN_DIR_TARGET}/{HOME_DIR}"
            )
            if "DET_EXPERIMENT_CONFIG" in env:
                env["DET_EXPERIMENT_CONFIG"] = config_seen_inside(env["DET_EXPERIMENT_CONFIG"])
            return self.namespaces.wrap(argv, binds, identity=identity, chdir=inside), env
        if identity is not None:
            try:
                hand_over(workspace.run_dir, workspace.workdir, identity)
                allow_traversal(self.home_of(workspace), workspace.run_dir)
            except OSError as exc:
                raise ContainerStartError(f"cannot give the task its files: {exc}") from exc
        if wrapper == "fixed_paths":
            note = FALLBACK_TASK_NOTE.format(reason=self.no_namespace_reason)
            with workspace.stderr_path.open("a", encoding="utf-8") as stream:
                stream.write(note + "\n")
            try:
                links = fallback_links(spec, workspace)
            except OSError as exc:
                raise ContainerStartError(f"cannot prepare the task's paths: {exc}") from exc
            return self.fixed_paths.wrap(argv, links, identity), env
        return argv, env

    @staticmethod
    def home_of(workspace: Workspace) -> Path:
        """The agent home a workspace lies in (``<home>/tasks/<allocation>/rank-<r>``)."""
        return workspace.root.parent.parent.parent

    def handle_name(self, spec: TaskSpec) -> str:
        """The handle's name (ContainerRunner: the engine's container name)."""
        return f"{spec.allocation_id}/{spec.rank}"

    def start(self, spec: TaskSpec, workspace: Workspace, sink: OutputSink) -> Handle:
        identity = self.identity(spec)
        argv, env = self.command(spec, workspace, identity)
        if not argv:
            raise ContainerStartError("the task has an empty command")
        # A wrapper becomes the task's user itself; a bare command is started as it.
        bare = self.wrapper(spec, workspace, identity) is None
        direct = identity if bare else None
        warm = self.warm if bare and identity is None and argv == list(spec.argv) else None
        outputs: list[BinaryIO] = []
        proc: TaskProcess | None = None
        try:
            outputs = [workspace.stdout_path.open("ab"), workspace.stderr_path.open("ab")]
            if warm is not None:
                proc = warm.spawn(
                    argv,
                    workspace.workdir,
                    env,
                    umask=_TASK_UMASK,
                    outputs=(outputs[0].fileno(), outputs[1].fileno()),
                    stderr_path=workspace.stderr_path,
                )
            if proc is None:
                popen = subprocess.Popen(
                    argv,
                    cwd=workspace.workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=outputs[0],
                    stderr=outputs[1],
                    start_new_session=True,
                    close_fds=True,
                    umask=_TASK_UMASK,
                    user=direct.uid if direct is not None else None,
                    group=direct.gid if direct is not None else None,
                    extra_groups=[] if direct is not None else None,
                )
                proc = ChildProcess(popen)
        except OSError as exc:
            raise ContainerStartError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
        finally:
            for stream in outputs:
                stream.close()
        started = _start_time(proc.pid)
        if started is not None:
            with contextlib.suppress(OSError):
                (workspace.root / PID_FILE).write_text(f"{proc.pid} {started}", encoding="ascii")
        handle = Handle(name=self.handle_name(spec), proc=proc)
        for path, stdtype in ((workspace.stdout_path, "stdout"), (workspace.stderr_path, "stderr")):
            reader = threading.Thread(
                target=_tail,
                args=(path, stdtype, sink, handle.exited),
                name=f"output {handle.name} {stdtype}",
                daemon=True,
            )
            reader.start()
            handle.readers.append(reader)
        if self.on_exit is not None:
            threading.Thread(
                target=_await_exit,
                args=(proc, self.on_exit),
                name=f"exit {handle.name}",
                daemon=True,
            ).start()
        return handle

    def poll(self, handle: Handle) -> int | None:
        with handle.lock:
            if handle.exit_seen is None:
                if not handle.proc.has_exited():
                    return None
                handle.exit_code = handle.proc.reap()
                handle.exit_seen = time.monotonic()
                handle.exited.set()
                for reader in handle.readers:  # usually done in a moment: report the exit now
                    reader.join(_JOIN_S)
            drained = all(not reader.is_alive() for reader in handle.readers)
            if drained or time.monotonic() - handle.exit_seen > _DRAIN_TIMEOUT_S:
                return handle.exit_code
            return None

    def terminate(self, handle: Handle) -> None:
        self._signal(handle, signal.SIGTERM)

    def kill(self, handle: Handle) -> None:
        self._signal(handle, signal.SIGKILL)

    def _signal(self, handle: Handle, signum: int) -> None:
        with handle.lock:
            if handle.exit_seen is None and not handle.proc.reaped:
                _signal_group(handle.pid, signum)
