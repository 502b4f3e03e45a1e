"""A master serving from several worker processes (``workers`` > 1 in the master's settings,
``stalwart master --workers N``).

:func:`serve_workers` (the process that ``stalwart master`` runs) prepares the database once
(migrations, bootstrap), binds the listening socket, and forks ``workers`` processes that each
serve the whole app on that socket (the kernel spreads connections among them). One of them
leads and runs the cluster loop; :mod:`stalwart.master.coordination` says how they stay one
master. The supervisor itself serves nothing:

- a worker that dies (a crash, the OOM killer) is replaced, at most one a second; the others
  serve on meanwhile, and if the leader died another worker takes over;
- SIGTERM or SIGINT is passed to every worker, each stops cleanly
  (:mod:`stalwart.master.stopping`), and the supervisor exits when they have;
- the workers die with the supervisor (``PR_SET_PDEATHSIG``): a supervisor killed outright
  leaves no worker serving the port.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import time
import uuid
from types import FrameType

import uvicorn

from stalwart.master.app import create_app, open_state
from stalwart.master.settings import MasterSettings
from stalwart.master.stopping import SERVER_GRACE_S, STOP_BUDGET_S

__all__ = ["serve_workers"]

log = logging.getLogger("stalwart.master")

_RESTART_GAP_S = 1.0
"""The least time between two replacements of dead workers (a crash loop stays slow)."""

_PR_SET_PDEATHSIG = 1


def serve_workers(settings: MasterSettings) -> None:
    """Serve ``settings`` from ``settings.workers`` processes until SIGTERM or SIGINT (see the
    module docstring)."""
    state = open_state(settings)  # migrate and bootstrap once, before any worker starts
    state.rm.close()
    state.engine.dispose()
    listener = _listen(settings)
    master_id = str(uuid.uuid4())
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    workers: dict[int, int] = {}  # pid -> worker number
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for number in range(settings.workers):
        workers[_fork(settings, listener, master_id, number)] = number
    last_restart = 0.0
    deadline: float | None = None
    while workers:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if stopping and deadline is None:
                deadline = time.monotonic() + STOP_BUDGET_S
            if deadline is not None and time.monotonic() > deadline:
                for late in workers:  # past the stop budget: they are stuck
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(late, signal.SIGKILL)
            time.sleep(0.05)
            continue
        number = workers.pop(pid, -1)
        if stopping or number < 0:
            continue
        log.warning(
            "master worker %d (pid %d) exited (%s); starting another",
            number,
            pid,
            _describe(status),
        )
        time.sleep(max(0.0, last_restart + _RESTART_GAP_S - time.monotonic()))
        last_restart = time.monotonic()
        if not stopping:
            workers[_fork(settings, listener, master_id, number)] = number
    listener.close()


def _listen(settings: MasterSettings) -> socket.socket:
    """The listening socket every worker accepts on (as uvicorn would bind it)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((settings.host, settings.port))
    listener.listen(2048)
    listener.set_inheritable(True)
    return listener


def _fork(settings: MasterSettings, listener: socket.socket, master_id: str, number: int) -> int:
    """Start worker ``number``; its pid (in the supervisor). The worker never returns."""
    pid = os.fork()
    if pid != 0:
        return pid
    code = 1
    try:
        _die_with_parent()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        code = _serve_one(settings, listener, master_id)
    except BaseException:
        log.exception("master worker %d failed", number)
    finally:
        os._exit(code)


def _serve_one(settings: MasterSettings, listener: socket.socket, master_id: str) -> int:
    from stalwart.master.serve import MasterServer, uvicorn_options, warm_routes

    app = create_app(settings, master_id=master_id)
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=int(SERVER_GRACE_S),
        **uvicorn_options(settings),
    )
    warm_routes(app)
    server = MasterServer(config, app.state.stop_gate)
    server.run(sockets=[listener])
    return 0 if server.started else 3


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the supervisor dies."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the supervisor died before prctl took effect
        os._exit(1)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"
