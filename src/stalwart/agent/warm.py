"""Warm starts: the agent's side of :mod:`stalwart.agent.forkserver`.

:class:`WarmStarts` keeps one fork server per interpreter and start-up environment and hands
:class:`~stalwart.agent.runner.ProcessRunner` a :class:`ForkedProcess` for each task it can
start warm, or None for the others (which start as before). A task starts warm when all hold:

- its command is ``python[3[.N]] [-u] SCRIPT ARGS...`` or ``python[3[.N]] [-u] -m MODULE
  ARGS...`` with no startup hook, wrapper or other user around it (the runner decides that),
  or ``sh -c`` of such a command in plain words (how the master runs an ``entrypoint``
  string: no quoting, variables, globs, redirections or other shell syntax in it);
- the ``python`` it names (looked up on the task's ``PATH``) is a fork server's interpreter
  (the same file, in the same directory: a virtual environment's ``python`` and ``python3``
  are one), and the variables that shape an interpreter's
  start (``PYTHON*`` but ``PYTHONUNBUFFERED``, ``HOME``, ``LANG``, ``LC_ALL``, ``LC_CTYPE``) are
  the server's, with no relative ``PYTHONPATH`` entry;
- that server has finished its preloads (a task that finds it still loading, or finds none,
  starts cold while the server gets ready: nobody waits for it);
- nothing in the directory the task's ``sys.path`` starts with (the script's, or the working
  directory for ``-m``) is named like a preloaded module, which a fresh interpreter would have
  imported from there instead.

A fork server that dies takes its tasks' exit codes with it: their groups are killed and they
exit with ``-SIGKILL`` and a line saying why, and a new server is started at the next
eligible task, at most once a minute.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stalwart.agent.forkserver import MAX_MESSAGE

__all__ = ["ForkServer", "ForkedProcess", "Launch", "WarmStarts", "plan"]

log = logging.getLogger(__name__)

_PYTHON_NAME = re.compile(r"python(3(\.\d+)?)?")
_SHELLS = frozenset({"sh", "/bin/sh", "/usr/bin/sh", "bash", "/bin/bash", "/usr/bin/bash"})
_PLAIN_WORDS = re.compile(r"[\w@%+=:,./ -]*")
"""A ``sh -c`` string that means the same split on spaces as the shell's parse."""
_START_VARS = frozenset({"HOME", "LANG", "LC_ALL", "LC_CTYPE"})
_BOOT = "from stalwart.agent.forkserver import main; main()"
_REPLY_TIMEOUT_S = 30.0
RETRY_AFTER_S = 60.0
"""After a fork server died, how long its key starts tasks cold before a new one is tried."""
SERVER_LOST = "stalwart agent: the warm Python that started this task exited; the task was stopped"
"""What a task whose fork server died gets on its stderr."""


@dataclass(frozen=True)
class Launch:
    """A task command a fork server can run: ``python`` resolved, and what it runs."""

    python: Path
    program: str
    """The interpreter as the command names it (``python3``), for its messages."""
    argv: list[str]
    """The task's ``sys.argv`` (for ``-m``, runpy replaces the first item with the module's
    file)."""
    script: str | None
    module: str | None
    unbuffered: bool
    path0: Path
    """The directory a fresh interpreter would put first on ``sys.path``."""
    command: tuple[str, ...] = ()
    """The interpreter's command words (``python3 train.py --lr 0.1``): the child's process
    title, as ``ps`` and ``pgrep -f`` would show a fresh interpreter."""


def plan(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> Launch | None:
    """How ``argv`` would start warm in ``cwd`` with ``env``, or None when it cannot."""
    if len(argv) == 3 and argv[0] in _SHELLS and argv[1] == "-c":
        if not _PLAIN_WORDS.fullmatch(argv[2]) or "=" in argv[2].split(" ", 1)[0]:
            return None
        argv = argv[2].split()
    if len(argv) < 2 or not _PYTHON_NAME.fullmatch(os.path.basename(argv[0])):
        return None
    found = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH", ""))
    if found is None:
        return None
    python = Path(cwd, found)
    rest = list(argv[1:])
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    while rest and rest[0] == "-u":
        unbuffered = True
        rest.pop(0)
    command = tuple(argv)
    if len(rest) >= 2 and rest[0] == "-m":
        module_argv = [rest[1], *rest[2:]]
        return Launch(python, argv[0], module_argv, None, rest[1], unbuffered, cwd, command)
    if not rest or rest[0].startswith("-"):
        return None
    script = Path(cwd, rest[0])
    path0 = script.resolve().parent
    return Launch(python, argv[0], rest, rest[0], None, unbuffered, path0, command)


def start_env(env: Mapping[str, str]) -> dict[str, str] | None:
    """The variables that shape an interpreter's start, or None when a relative PYTHONPATH
    entry makes the start depend on the working directory."""
    picked = {
        name: value
        for name, value in env.items()
        if (name.startswith("PYTHON") and name != "PYTHONUNBUFFERED") or name in _START_VARS
    }
    if any(entry and not os.path.isabs(entry) for entry in picked.get("PYTHONPATH", "").split(":")):
        return None
    return picked


def _shadowing(path0: Path, modules: frozenset[str]) -> bool:
    """Whether ``path0`` holds something named like one of ``modules``."""
    try:
        names = os.listdir(path0)
    except OSError:
        return False
    return any(name.partition(".")[0] in modules for name in names)


class ForkedProcess:
    """A task a fork server forked: its pid, and its exit code once the server reaped it.

    Satisfies :class:`~stalwart.agent.runner.TaskProcess`. The server kills what is left of
    the task's group before it reaps it, so :meth:`reap` only returns the code."""

    def __init__(self, pid: int, stderr_path: Path | None = None) -> None:
        self.pid = pid
        self.stderr_path = stderr_path
        self._code: int | None = None
        self._done = threading.Event()

    def finish(self, code: int) -> None:
        """Record the exit (from the server's reader thread)."""
        self._code = code
        self._done.set()

    def has_exited(self) -> bool:
        return self._done.is_set()

    def wait_exited(self) -> None:
        self._done.wait()

    def reap(self) -> int:
        self._done.wait()
        assert self._code is not None
        return self._code

    @property
    def reaped(self) -> bool:
        return self._done.is_set()


class ForkServer:
    """One warm interpreter (``python``, started with ``env``), its socket and reader thread.

    :meth:`spawn` is called from one thread at a time (the runner's); the reader thread
    records exits. When the server dies, each task still running has its group killed, gets
    :data:`SERVER_LOST` on its stderr and exits with ``-SIGKILL``."""

    def __init__(
        self, python: Path, env: Mapping[str, str], *, reply_timeout: float = _REPLY_TIMEOUT_S
    ) -> None:
        self.python = python
        self.ready = threading.Event()
        self.dead = threading.Event()
        self.modules: frozenset[str] = frozenset()
        self._reply_timeout = reply_timeout
        self._next_id = 0
        self._stderr_paths: dict[int, Path] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._replies: list[dict[str, Any]] = []
        self._waiting: set[int] = set()
        """Requests whose :meth:`spawn` still waits for the answer."""
        self._reply = threading.Condition()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [str(python), "-c", _BOOT, str(theirs.fileno()), ",".join(env)],
                pass_fds=(theirs.fileno(),),
                env=dict(env),
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        threading.Thread(target=self._read, name=f"fork server {python}", daemon=True).start()

    def spawn(
        self,
        launch: Launch,
        cwd: Path,
        env: Mapping[str, str],
        *,
        umask: int,
        outputs: tuple[int, int],
        stderr_path: Path,
    ) -> ForkedProcess:
        """Fork the task with ``outputs`` (stdout, stderr) as its descriptors 1 and 2
        (``stderr_path`` is the file the second one writes to).

        Raises OSError when the server could not fork it, is gone, or did not answer in time
        (a child it forks after that is killed at once: the agent starts the task otherwise)."""
        self._next_id += 1
        request_id = self._next_id
        self._stderr_paths[request_id] = stderr_path
        request: dict[str, Any] = {
            "id": request_id,
            "program": launch.program,
            "argv": launch.argv,
            "cwd": str(cwd),
            "env": dict(env),
            "umask": umask,
            "unbuffered": launch.unbuffered,
            "title": " ".join(launch.command),
        }
        if launch.module is not None:
            request["module"] = launch.module
        else:
            request["script"] = launch.script
        message = json.dumps(request).encode()
        try:
            if len(message) > MAX_MESSAGE:
                raise OSError("the task's environment is too large for a warm start")
            with self._reply:
                self._waiting.add(request_id)
            socket.send_fds(self._sock, [message], list(outputs))
            reply = self._await_reply(request_id)
        finally:
            with self._reply:
                self._waiting.discard(request_id)
            self._stderr_paths.pop(request_id, None)
        if "process" not in reply:
            raise OSError(str(reply.get("error", "the warm Python could not fork")))
        process: ForkedProcess = reply["process"]  # it may have exited already
        return process

    def _await_reply(self, request_id: int) -> dict[str, Any]:
        """The server's answer to ``request_id``; OSError once the server is dead or the
        reply timeout has passed (a child forked for it is then stopped, here or in
        :meth:`_handle` when its answer comes later)."""
        deadline = time.monotonic() + self._reply_timeout
        with self._reply:
            while True:
                reply = next((r for r in self._replies if r.get("started") == request_id), None)
                if reply is not None:
                    self._replies.remove(reply)
                left = deadline - time.monotonic()
                if reply is not None and left > 0:
                    return reply
                if self.dead.is_set() or left <= 0:
                    self._waiting.discard(request_id)
                    if reply is not None and "pid" in reply:
                        self._stop_late(int(reply["pid"]))
                    raise OSError("the warm Python did not answer")
                self._reply.wait(left)

    def _stop_late(self, pid: int) -> None:
        """Kill the group of a child whose start the agent gave up on (its exit is ignored)."""
        self._children.pop(pid, None)
        log.warning("stopped task process %d: the warm Python forked it too late", pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def close(self) -> None:
        """Close the socket: the server exits, its tasks run on."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def _read(self) -> None:
        try:
            while True:
                message = self._sock.recv(MAX_MESSAGE)
                if not message:
                    break
                self._handle(json.loads(message))
        except (OSError, ValueError) as exc:
            log.warning("lost the warm Python %s: %s", self.python, exc)
        finally:
            self._lost()

    def _handle(self, message: dict[str, Any]) -> None:
        if message.get("ready"):
            self.modules = frozenset(message.get("modules", ()))
            self.ready.set()
        elif "exited" in message:
            child = self._children.pop(int(message["exited"]), None)
            if child is not None:
                child.finish(int(message["code"]))
        elif "started" in message:
            request_id = int(message["started"])
            with self._reply:
                if request_id not in self._waiting:  # too late: the agent gave up on it
                    if "pid" in message:
                        self._stop_late(int(message["pid"]))
                    return
                if "pid" in message:
                    pid = int(message["pid"])
                    path = self._stderr_paths.get(request_id)
                    message["process"] = self._children[pid] = ForkedProcess(pid, path)
                self._replies.append(message)
                self._reply.notify_all()

    def _lost(self) -> None:
        self.dead.set()
        with self._reply:
            self._reply.notify_all()
        self._sock.close()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(5)
        for pid, child in list(self._children.items()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            log.warning("task process %d lost its warm Python; stopped", pid)
            if child.stderr_path is not None:
                with contextlib.suppress(OSError), child.stderr_path.open("a") as stream:
                    stream.write(SERVER_LOST + "\n")
            child.finish(-signal.SIGKILL)
        self._children.clear()


_Key = tuple[str, str, tuple[tuple[str, str], ...]]


def _key(python: Path, startup: Mapping[str, str]) -> _Key:
    """One server per interpreter: ``python``, ``python3`` and ``python3.11`` of one
    environment (same directory, same file) share it."""
    return (str(python.parent), os.path.realpath(python), tuple(sorted(startup.items())))


class WarmStarts:
    """The agent's fork servers, one per (interpreter, start-up environment), each started at
    the first task that could use it. Used from the runner's thread; :meth:`close` from any."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._servers: dict[_Key, ForkServer] = {}
        self._died: dict[_Key, float] = {}
        self._clock = clock

    def spawn(
        self,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        *,
        umask: int,
        outputs: tuple[int, int],
        stderr_path: Path,
    ) -> ForkedProcess | None:
        """The task forked by a ready fork server, or None when it must start cold (see the
        module docstring). Raises OSError when a server took the task and failed it."""
        launch = plan(argv, cwd, env)
        startup = start_env(env)
        if launch is None or startup is None:
            return None
        key = _key(launch.python, startup)
        server = self._servers.get(key)
        if server is not None and server.dead.is_set():
            del self._servers[key]
            self._died[key] = self._clock()
            server = None
        if server is None:
            self._start(key, launch.python, startup)
            return None
        if not server.ready.is_set() or _shadowing(launch.path0, server.modules):
            return None
        return server.spawn(launch, cwd, env, umask=umask, outputs=outputs, stderr_path=stderr_path)

    def prepare(self, python: Path, env: Mapping[str, str]) -> None:
        """Start the fork server for tasks run with ``python`` and ``env`` now, before the
        first such task (the agent does this for its own interpreter)."""
        startup = start_env(env)
        if startup is None:
            return
        key = _key(python, startup)
        if key not in self._servers:
            self._start(key, python, startup)

    def _start(
        self,
        key: _Key,
        python: Path,
        startup: Mapping[str, str],
    ) -> None:
        died = self._died.get(key)
        if died is not None and self._clock() - died < RETRY_AFTER_S:
            return
        log.info("starting a warm Python for the tasks run with %s", python)
        try:
            self._servers[key] = ForkServer(python, startup)
        except OSError as exc:
            log.warning("no warm Python for %s: %s", python, exc)
            self._died[key] = self._clock()

    def close(self) -> None:
        """Stop every fork server (the tasks they started run on)."""
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.close()
