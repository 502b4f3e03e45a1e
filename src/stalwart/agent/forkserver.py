"""The fork server: a warm Python that starts local Python tasks by forking.

A trial that is ``python3 train.py`` spends most of its start-up importing the harness (about
0.15 s of CPU for ``stalwart.core`` and httpx): with sixteen one-second trials a second that is
more CPU than a small node has. The agent (:mod:`stalwart.agent.warm`) therefore keeps one
process per Python interpreter that has imported the harness once, and asks it to fork each
eligible task. The forked child becomes the task exactly as ``python SCRIPT ARGS`` or
``python -m MODULE ARGS`` would start it: its own session and process group, the task's
environment, working directory, umask and output files, ``sys.argv``, ``sys.path[0]``, a fresh
``__main__``, the signal dispositions a fresh interpreter gets, and the interpreter's exit code
(``sys.exit``'s, 1 and a traceback for an uncaught exception, 2 for a script that cannot be
opened, death by SIGINT for an uncaught KeyboardInterrupt).

The child ends the way a forked ``multiprocessing`` worker does, not with the interpreter's
whole teardown: non-daemon threads are joined and ``atexit`` runs as usual, then unreachable
objects are collected (their finalizers run), every open file is flushed, and the process
exits. Tearing down every preloaded module would touch, and so copy, the whole inherited heap:
that was 11 of a trivial task's 14 ms of CPU. What differs from a fresh interpreter: objects
still referenced at exit (a module's globals) are not finalized, as in such a worker.

This module runs in that process (``python -c 'from stalwart.agent.forkserver import main;
main()' FD NAMES``, ``NAMES`` the comma-separated variables it was started with) and imports
nothing but the standard library before its preloads. What the interpreter added to its own
environment as it started (``LC_CTYPE``, when it coerced a C locale) is added to each task's
unless the task sets it, as a fresh interpreter would. Its protocol
with the agent, over the ``SOCK_SEQPACKET`` socket ``FD`` (one JSON object per message):

- server -> agent, once: ``{"ready": true, "modules": [top-level module names preloaded]}``;
- agent -> server: ``{"id": N, "program": "python3", "argv": [...], "script" | "module": ...,
  "cwd": ..., "env": {...}, "umask": M, "unbuffered": bool, "title": "python3 train.py ..."}``
  with the task's stdout and stderr descriptors attached (``SCM_RIGHTS``); the child takes
  ``title`` as its process title (``ps``, ``pgrep -f``) and the program's name as its short
  name (``comm``) when the ``setproctitle`` package is there (a dependency of Stalwart's);
- server -> agent: ``{"started": N, "pid": P}`` once the child leads its own session, or
  ``{"started": N, "error": "..."}`` when it could not fork;
- server -> agent: ``{"exited": P, "code": C}`` when a child exits (``C`` negative: killed by
  that signal). What is left of the child's process group is killed first, as the agent does
  for tasks it starts itself, and only then is the child reaped, so its group id cannot be
  reused before that.

The server exits when the agent's end of the socket closes; its children run on.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import gc
import importlib
import io
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["PRELOAD", "main"]

_Handler = Callable[[int, types.FrameType | None], Any] | int | None
"""A signal disposition, as ``signal.signal`` returns it."""

PRELOAD: tuple[str, ...] = (
    "stalwart",
    "stalwart.core",
    "httpx",
    "httpcore",  # httpx imports its transport's modules at the first client
    "h11",
    "certifi",
    "encodings.idna",
)
"""What the server imports once for every task it forks: the harness and its HTTP client
(everything a Core API trial imports before its own code's imports)."""
MAX_MESSAGE = 1 << 22
"""The largest request (a task's environment may be big)."""
_SKIPPED_FILES = frozenset({__file__, runpy.__file__, "<frozen runpy>", "<string>"})
"""The frames above a task's own in its tracebacks: ``-c``'s, this module's and runpy's."""


def main() -> None:
    """Serve the agent on the socket whose descriptor is ``sys.argv[1]`` until it closes."""
    sock = socket.socket(fileno=int(sys.argv[1]))
    given = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else set(os.environ)
    added = {name: value for name, value in os.environ.items() if name not in given}
    for name in PRELOAD:
        importlib.import_module(name)
    # Made once here rather than in each task (a TLS context costs a few ms to make).
    importlib.import_module("stalwart.core._client").plain_http_context()
    with contextlib.suppress(ImportError):  # without it, children keep this server's title
        titles = importlib.import_module("setproctitle")
        # It finds the memory to write titles into through the C environment, which a child
        # replaces before it retitles itself: take it over now, while it is the original.
        titles.setproctitle(titles.getproctitle())
    gc.collect()
    gc.freeze()  # the children share these pages instead of copying them as refcounts move
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    # The one disposition this server changes; the others are what a fresh interpreter started
    # by the agent would have (ignored signals stay ignored across exec), and children keep them.
    inherited = signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    modules = sorted({name.partition(".")[0] for name in sys.modules})
    _send(sock, {"ready": True, "modules": modules})
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
            _reap(sock)
        if sock.fileno() in readable:
            message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
            if not message:
                return  # the agent is gone: its tasks run on without us
            request = json.loads(message)
            # No try/finally around the fork: the child unwinds through here as it ends.
            try:
                request["env"] = {**added, **request["env"]}
                pid = _fork(
                    request, fds, closing=(sock.fileno(), wake_r, wake_w), sigchld=inherited
                )
            except OSError as exc:
                reply: dict[str, Any] = {"started": request["id"], "error": str(exc)}
            else:
                reply = {"started": request["id"], "pid": pid}
            for fd in fds:
                os.close(fd)
            _send(sock, reply)
            _reap(sock)


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode())


def _reap(sock: socket.socket) -> None:
    """Report every child that has exited, killing what is left of its group first."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(info.si_pid, signal.SIGKILL)
        _, status = os.waitpid(info.si_pid, 0)
        _send(sock, {"exited": info.si_pid, "code": os.waitstatus_to_exitcode(status)})


def _fork(
    request: dict[str, Any],
    fds: Sequence[int],
    *,
    closing: Sequence[int],
    sigchld: _Handler,
) -> int:
    """Fork the task; return its pid once it leads its own session (the agent may signal its
    group from then on)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the task: it never returns from here
        os.close(ready_r)
        os.setsid()
        os.close(ready_w)
        _become(request, fds, closing, sigchld)
    os.close(ready_w)
    os.read(ready_r, 1)  # EOF once the child has its session
    os.close(ready_r)
    return pid


def _retitle(title: str, program: str) -> None:
    """Show this process as ``title`` (its command line) and ``program``'s name (its short
    name), as a fresh interpreter started with that command would be shown; nothing when the
    ``setproctitle`` package was not there to preload."""
    titles = sys.modules.get("setproctitle")
    if titles is None or not title:
        return
    titles.setproctitle(title)
    titles.setthreadtitle(os.path.basename(program))


def _become(
    request: dict[str, Any],
    fds: Sequence[int],
    closing: Sequence[int],
    sigchld: _Handler,
) -> None:
    """Turn this forked child into the task (see the module docstring), run it and end the
    process (:func:`_exit`)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL if sigchld is None else sigchld)
    for fd in closing:
        os.close(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in (devnull, *fds):
        os.close(fd)
    os.umask(int(request["umask"]))
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    _reopen_stdio(unbuffered=bool(request["unbuffered"]))
    sys.excepthook = _task_excepthook
    os.chdir(request["cwd"])
    sys.argv = list(request["argv"])
    _retitle(str(request.get("title") or ""), str(request["program"]))
    try:
        if "module" in request:
            sys.path[0] = os.getcwd()
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        else:
            _run_script(request["script"], request["program"])
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        raise  # the interpreter's own end: the traceback, then death by SIGINT
    except BaseException as exc:  # the task's uncaught exception, reported as Python does
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code = 1
    else:
        code = 0
    _exit(code)


def _exit_code(exc: SystemExit) -> int:
    """The exit status ``sys.exit(code)`` gives (a message is printed and gives 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _exit(code: int) -> None:
    """End the task: threads joined, ``atexit``, finalizers of what is unreachable, open files
    flushed; then leave without tearing down the inherited heap (see the module docstring)."""
    try:
        getattr(threading, "_shutdown")()  # noqa: B009 (what the interpreter's exit calls)
        atexit._run_exitfuncs()
        gc.collect()
        for obj in gc.get_objects():  # after gc.freeze(): only what the task made
            if isinstance(obj, io.IOBase):
                try:
                    if not obj.closed:
                        obj.flush()
                except (OSError, ValueError):
                    pass
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
    finally:
        os._exit(code)


def _run_script(script: str, program: str) -> None:
    """Run ``script`` as ``__main__``, as ``python script`` does."""
    path = os.path.abspath(script)
    try:
        with open(path, "rb") as stream:
            source = stream.read()
    except OSError as exc:
        print(
            f"{program}: can't open file {path!r}: [Errno {exc.errno}] {exc.strerror}",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    from importlib.machinery import SourceFileLoader

    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__loader__ = SourceFileLoader("__main__", path)
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    module.__cached__ = None  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    code = compile(source, path, "exec", dont_inherit=True)
    exec(code, module.__dict__)


def _reopen_stdio(*, unbuffered: bool) -> None:
    """New ``sys.stdin/stdout/stderr`` on descriptors 0-2, as the interpreter makes them."""
    encoding = sys.stdout.encoding if sys.stdout is not None else "utf-8"
    streams = []
    for fd, mode in ((0, "rb"), (1, "wb"), (2, "wb")):
        buffering = 0 if unbuffered and fd else -1
        raw = io.open(fd, mode, buffering=buffering, closefd=False)  # noqa: UP020, SIM115
        streams.append(
            io.TextIOWrapper(
                raw,
                encoding=encoding,
                errors="backslashreplace" if fd == 2 else "strict",
                line_buffering=not unbuffered and (fd == 2 or os.isatty(fd)),
                write_through=unbuffered and fd != 0,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]


def _task_excepthook(
    kind: type[BaseException], value: BaseException, tb: types.TracebackType | None
) -> None:
    """The default hook, without the fork server's own frames at the top of the traceback."""
    while tb is not None and tb.tb_frame.f_code.co_filename in _SKIPPED_FILES:
        tb = tb.tb_next
    sys.__excepthook__(kind, value.with_traceback(tb), tb)  # it prints __traceback__
