"""``python -m stalwart.launch.wrap_rank [--rank N] [--] CMD...``: run one worker, tagging its
output with its rank.

Contract:

- Every line of CMD's stdout and stderr is written to the same stream of this process with the
  prefix ``[rank=N] ``, where N is ``--rank``, else ``RANK`` (set by ``torch.distributed.run``
  for each worker); with neither, lines pass unchanged. Lines end at ``\\n``, ``\\r\\n`` or
  ``\\r`` (each update of a progress bar gets its prefix); a line over 64 KiB is cut. Bytes pass
  as they are, nothing is decoded.
- CMD runs in its own process group. SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 sent to this
  process are passed to that group once. CMD is killed if this process dies (Linux: parent-death
  signal), and this process is told (SIGTERM) if its own parent, the launcher, dies; it then
  stops CMD, killing it after :data:`ORPHAN_GRACE_S` seconds.
- The exit status is CMD's (``128 + signal`` when a signal ended it).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import BinaryIO

from stalwart.core.env import launcher_rank

__all__ = ["ORPHAN_GRACE_S", "LinePrefixer", "main", "run"]

ORPHAN_GRACE_S = 10.0
"""How long a worker whose launcher died may take to stop before it is killed."""

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_LINE_END = re.compile(rb"\r\n|\r|\n")
_MAX_LINE = 64 * 1024
_PR_SET_PDEATHSIG = 1


class LinePrefixer:
    """Writes the lines of a byte stream to ``out`` with ``prefix`` in front of each one."""

    def __init__(self, prefix: bytes, out: BinaryIO, max_line: int = _MAX_LINE) -> None:
        self._prefix = prefix
        self._out = out
        self._max = max_line
        self._buf = b""

    def feed(self, data: bytes) -> None:
        """Write the lines that ``data`` completes (a trailing ``\\r`` waits: it may be the
        first half of ``\\r\\n``)."""
        buf = self._buf + data
        start = 0
        for match in _LINE_END.finditer(buf):
            if match.group() == b"\r" and match.end() == len(buf):
                break
            self._out.write(self._prefix + buf[start : match.end()])
            start = match.end()
        rest = buf[start:]
        while len(rest) > self._max:
            self._out.write(self._prefix + rest[: self._max] + b"\n")
            rest = rest[self._max :]
        self._buf = rest
        self._out.flush()

    def finish(self) -> None:
        """Write what is left (a last line without its end gets ``\\n``)."""
        rest, self._buf = self._buf, b""
        if rest:
            end = b"" if rest.endswith((b"\n", b"\r")) else b"\n"
            self._out.write(self._prefix + rest + end)
        self._out.flush()


def _pump(fd: int, prefixer: LinePrefixer) -> None:
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 65536):
            prefixer.feed(chunk)
    prefixer.finish()
    os.close(fd)


def _set_parent_death_signal(signum: int) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)


def _kill_with_parent() -> None:
    """``preexec_fn`` of CMD: it dies with this process."""
    _set_parent_death_signal(signal.SIGKILL)


def run(
    cmd: Sequence[str],
    rank: int | None,
    *,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
) -> int:
    """Run ``cmd`` with its output prefixed (module contract); its exit status."""
    if not cmd:
        raise ValueError("wrap_rank needs a command to run")
    parent = os.getppid()
    _set_parent_death_signal(signal.SIGTERM)
    prefix = b"" if rank is None else f"[rank={rank}] ".encode()
    try:
        proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            process_group=0,
            preexec_fn=_kill_with_parent,  # single-threaded here: safe
        )
    except OSError as exc:
        sys.stderr.write(f"{prefix.decode()}wrap_rank: cannot run {cmd[0]!r}: {exc}\n")
        return 127
    assert proc.stdout is not None
    assert proc.stderr is not None
    outs = (stdout or sys.stdout.buffer, stderr or sys.stderr.buffer)
    pumps = [
        threading.Thread(target=_pump, args=(os.dup(pipe.fileno()), LinePrefixer(prefix, out)))
        for pipe, out in zip((proc.stdout, proc.stderr), outs, strict=True)
    ]
    proc.stdout.close()
    proc.stderr.close()
    for pump in pumps:
        pump.start()
    restore = _forward_signals(proc, parent)
    try:
        code = proc.wait()
        for pump in pumps:
            pump.join()
    finally:
        restore()
    return 128 - code if code < 0 else code


def _forward_signals(proc: subprocess.Popen[bytes], parent: int) -> Callable[[], None]:
    """Pass the :data:`FORWARDED` signals to ``proc``'s group; returns the undo."""
    timer: list[threading.Timer] = []

    def kill_group() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def handler(signum: int, _frame: types.FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)
        if os.getppid() != parent and not timer:  # the launcher is gone: nobody will escalate
            timer.append(threading.Timer(ORPHAN_GRACE_S, kill_group))
            timer[0].daemon = True
            timer[0].start()

    previous = {signum: signal.signal(signum, handler) for signum in FORWARDED}
    if os.getppid() != parent:  # the launcher died before the death signal was armed
        handler(signal.SIGTERM, None)

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, old)
        for pending in timer:
            pending.cancel()

    return restore


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module contract)."""
    parser = argparse.ArgumentParser(
        prog="python -m stalwart.launch.wrap_rank",
        description="Run a command, prefixing each line of its output with [rank=N].",
    )
    parser.add_argument("--rank", type=int, default=None, help="the rank (default: $RANK)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="the command to run")
    args = parser.parse_args(argv)
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        parser.error("a command is required")
    rank = args.rank if args.rank is not None else launcher_rank()
    return run(cmd, rank)


if __name__ == "__main__":
    sys.exit(main())
