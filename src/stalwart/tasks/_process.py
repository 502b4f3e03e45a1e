"""The service process an in-task program runs (JupyterLab, TensorBoard) and its lifetime.

Contract:

- :class:`Service` starts the command with the program's stdout; when ``on_line`` is given,
  the child's stderr goes through a pipe that a reader thread copies to the program's stderr
  line by line (so users still see every line in ``det task logs``) and hands each line to
  ``on_line``. ``on_line`` must be quick: while it runs the pipe is not drained. An exception
  from it is logged and the copying goes on.
- The child dies with the program (Linux's parent-death signal: SIGTERM), so a program killed
  alone leaves no orphan service behind.
- :meth:`Service.forwarding_signals` forwards SIGTERM, SIGINT and SIGHUP to the child while the
  block runs (the agent signals the whole process group; a signal sent to the program alone,
  e.g. by a test, reaches the service too).
- :func:`setup_logging` gives the programs' own lines a level and a name.
- :func:`exit_code` is the status the program exits with: the child's, ``128 + N`` when it died
  of signal ``N`` (as a shell reports it).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

__all__ = ["Service", "exit_code", "missing_package", "setup_logging"]

logger = logging.getLogger("stalwart.tasks")

_PR_SET_PDEATHSIG = 1
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def setup_logging() -> None:
    """The programs' log lines (stderr, Determined's format); no line per HTTP request."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: [%(name)s] %(message)s")
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def missing_package(what: str, package: str, extra: str) -> str:
    """What to say when the task's Python lacks ``package`` (which provides ``what``)."""
    return (
        f"{what} is not installed in the task's Python ({sys.executable}). Install it into "
        f"that environment, e.g. `{sys.executable} -m pip install {package}` (or "
        f"`pip install 'stalwart[{extra}]'`), or choose an environment that has it."
    )


def exit_code(returncode: int) -> int:
    """The program's exit status for a child's ``returncode`` (see the contract)."""
    return 128 - returncode if returncode < 0 else returncode


def _die_with_parent() -> None:  # pragma: no cover (runs in the child between fork and exec)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class Service:
    """One running service (see the module contract)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.process = subprocess.Popen(
            self.argv,
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE if on_line is not None else None,
            preexec_fn=_die_with_parent,
        )
        self._reader: threading.Thread | None = None
        if on_line is not None:
            self._reader = threading.Thread(
                target=self._copy_lines, args=(on_line,), name="stalwart-service-log", daemon=True
            )
            self._reader.start()

    def _copy_lines(self, on_line: Callable[[str], None]) -> None:
        stream = self.process.stderr
        assert stream is not None
        out = sys.stderr.buffer
        for raw in iter(stream.readline, b""):
            with contextlib.suppress(OSError, ValueError):
                out.write(raw)
                out.flush()
            try:
                on_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
            except Exception:
                logger.exception("reading the service's log failed")
        stream.close()

    @contextlib.contextmanager
    def forwarding_signals(self, on_signal: Callable[[], None] | None = None) -> Iterator[None]:
        """Forward SIGTERM, SIGINT and SIGHUP to the child inside the block (main thread);
        ``on_signal`` (quick, no I/O) is called first, e.g. to stop reporting."""

        def forward(signum: int, frame: FrameType | None) -> None:
            if on_signal is not None:
                on_signal()
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def poll(self) -> int | None:
        """The child's return code, or None while it runs."""
        return self.process.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds (None: until it exits); the return code or None."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._reader is not None:
            self._reader.join(5)  # the rest of its log
        return code

    def stop(self, grace_s: float = 10.0) -> int:
        """Terminate the child (SIGTERM, SIGKILL after ``grace_s``); its return code."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            code = self.wait(grace_s)
            if code is not None:
                return code
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        return self.process.wait()
