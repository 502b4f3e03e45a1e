"""``python -m stalwart.launch.wrap_rank [--rank N | --rank-env NAMES | --no-rank] [--strip
REGEX] [--] CMD...``: run one worker, tagging its output with its rank.

Contract:

- Every line of CMD's stdout and stderr is written to the same stream of this process with the
  prefix ``[rank=N] ``, where N is ``--rank``, else the first of the variables ``--rank-env``
  names (comma-separated; default ``RANK``, which ``torch.distributed.run`` and DeepSpeed set
  for each worker) that holds an integer; with none, or ``--no-rank``, lines pass unchanged.
  Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (each update of a progress bar gets its prefix); a
  line over 64 KiB is cut. Bytes pass as they are, nothing is decoded. ``--strip REGEX`` first
  removes a match of REGEX at the start of each line (the ``[0]<stdout>:`` tags of
  ``horovodrun``).
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
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO

__all__ = ["ORPHAN_GRACE_S", "LinePrefixer", "main", "rank_from", "run"]

ORPHAN_GRACE_S = 10.0
"""How long a worker whose launcher died may take to stop before it is killed."""

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_LINE_END = re.compile(rb"\r\n|\r|\n")
_MAX_LINE = 64 * 1024
_PR_SET_PDEATHSIG = 1


class LinePrefixer:
    """Writes the lines of a byte stream to ``out`` with ``prefix`` in front of each one (and,
    with ``strip``, that pattern's match at the start of a line removed first)."""

    def __init__(
        self,
        prefix: bytes,
        out: BinaryIO,
        max_line: int = _MAX_LINE,
        strip: re.Pattern[bytes] | None = None,
    ) -> None:
        self._prefix = prefix
        self._out = out
        self._max = max_line
        self._strip = strip
        self._buf = b""
        self._continued = False  # the next bytes continue a line that was cut

    def _write(self, piece: bytes, *, cut: bool = False) -> None:
        if self._strip is not None and not self._continued:
            piece = self._strip.sub(b"", piece, count=1)
        self._out.write(self._prefix + piece)
        self._continued = cut

    def feed(self, data: bytes) -> None:
        """Write the lines that ``data`` completes (a trailing ``\\r`` waits: it may be the
        first half of ``\\r\\n``)."""
        buf = self._buf + data
        start = 0
        for match in _LINE_END.finditer(buf):
            if match.group() == b"\r" and match.end() == len(buf):
                break
            self._write(buf[start : match.end()])
            start = match.end()
        rest = buf[start:]
        while len(rest) > self._max:
            self._write(rest[: self._max] + b"\n", cut=True)
            rest = rest[self._max :]
        self._buf = rest
        self._out.flush()

    def finish(self) -> None:
        """Write what is left (a last line without its end gets ``\\n``)."""
        rest, self._buf = self._buf, b""
        if rest:
            end = b"" if rest.endswith((b"\n", b"\r")) else b"\n"
            self._write(rest + end)
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
    strip: re.Pattern[bytes] | None = None,
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
        threading.Thread(
            target=_pump, args=(os.dup(pipe.fileno()), LinePrefixer(prefix, out, strip=strip))
        )
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


def rank_from(names: Sequence[str], environ: Mapping[str, str] | None = None) -> int | None:
    """The first of the variables ``names`` that holds a non-negative integer, or None."""
    env = os.environ if environ is None else environ
    for name in names:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module contract)."""
    parser = argparse.ArgumentParser(
        prog="python -m stalwart.launch.wrap_rank",
        description="Run a command, prefixing each line of its output with [rank=N].",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--rank", type=int, default=None, help="the rank (default: $RANK)")
    which.add_argument(
        "--rank-env",
        default="RANK",
        metavar="NAMES",
        help="comma-separated variables to read the rank from, the first set one wins "
        "(default: RANK)",
    )
    which.add_argument("--no-rank", action="store_true", help="add no prefix")
    parser.add_argument(
        "--strip", metavar="REGEX", help="remove a match of REGEX at the start of each line"
    )
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="the command to run")
    args = parser.parse_args(argv)
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        parser.error("a command is required")
    strip = None
    if args.strip is not None:
        try:
            strip = re.compile(b"^(?:" + args.strip.encode() + b")")
        except re.error as exc:
            parser.error(f"--strip {args.strip!r}: {exc}")
    if args.no_rank:
        rank = None
    elif args.rank is not None:
        rank = args.rank
    else:
        rank = rank_from([name for name in args.rank_env.split(",") if name])
    return run(cmd, rank, strip=strip)


if __name__ == "__main__":
    sys.exit(main())
