"""Run a command in a private mount namespace with some bind mounts (``python -m`` entry point).

``python -I -m stalwart.agent.nsexec [--user] --bind SRC:DST [--bind SRC:DST ...] -- ARGV...``

1. ``unshare(CLONE_NEWNS)`` (with ``--user``: ``CLONE_NEWUSER | CLONE_NEWNS`` first, mapping the
   caller's uid and gid to themselves, so that an unprivileged caller may mount in its own
   namespaces and the command still runs as the same user);
2. marks every mount private (``MS_REC | MS_PRIVATE`` on ``/``), so nothing below leaks to the
   host or to other tasks;
3. bind-mounts each ``SRC`` on ``DST`` in order (``MS_BIND | MS_REC``), creating ``DST`` when it is
   missing (a later ``DST`` may lie inside an earlier one);
4. ``execvp`` s ``ARGV`` with the environment, working directory, session and process group it was
   given: the command keeps this process's pid, so the caller's signals and ``waitid`` reach it
   and its exit code is the caller's to see.

When a step fails it writes one line ``stalwart nsexec: ...`` to stderr and exits 126 (127 when
the command is not found), as a shell does. ``--check`` mounts and then verifies that each
``DST`` shows ``SRC`` (same device and inode) instead of running a command: exit 0 when it does.

The module imports only the standard library (it runs before every task), and nothing here
runs at import time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Sequence

__all__ = ["Bind", "main", "parse_args"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

EXIT_FAILED = 126
EXIT_NOT_FOUND = 127

Bind = tuple[str, str]
"""``(source, target)``: host path, and where the command sees it."""


class _SetupError(Exception):
    """A step before the exec failed (the message says which)."""


def parse_args(args: Sequence[str]) -> tuple[list[Bind], bool, bool, list[str]]:
    """``(binds, user, check, argv)`` from the command line (see the module docstring)."""
    binds: list[Bind] = []
    user = check = False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            break
        if arg == "--user":
            user = True
        elif arg == "--check":
            check = True
        elif arg == "--bind" and rest:
            source, sep, target = rest.pop(0).rpartition(":")
            if not sep or not source or not target:
                raise _SetupError("--bind wants SRC:DST")
            binds.append((source, target))
        else:
            raise _SetupError(f"unknown argument {arg!r}")
    if not check and not rest:
        raise _SetupError("no command after --")
    return binds, user, check, rest


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _call(what: str, result: int) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise _SetupError(f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="ascii") as stream:
            stream.write(text)
    except OSError as exc:
        raise _SetupError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _enter(libc: ctypes.CDLL, user: bool) -> None:
    """New mount (and user) namespace, every mount private."""
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNS | (CLONE_NEWUSER if user else 0)
    _call("unshare", libc.unshare(flags))
    if user:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _call("making / private", libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None))


def _bind(libc: ctypes.CDLL, source: str, target: str) -> None:
    try:
        os.makedirs(target, exist_ok=True)
    except OSError as exc:
        raise _SetupError(f"cannot create the mount point {target}: {exc.strerror or exc}") from exc
    _call(
        f"bind-mounting {source} on {target}",
        libc.mount(os.fsencode(source), os.fsencode(target), None, MS_BIND | MS_REC, None),
    )


def _same(source: str, target: str) -> bool:
    a, b = os.stat(source), os.stat(target)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def main(args: Sequence[str] | None = None) -> int:
    """Mount, then exec the command (returns only on failure, or after ``--check``)."""
    try:
        binds, user, check, argv = parse_args(sys.argv[1:] if args is None else args)
        libc = _libc()
        _enter(libc, user)
        for source, target in binds:
            _bind(libc, source, target)
        if check:
            return 0 if all(_same(s, t) for s, t in binds) else EXIT_FAILED
    except (_SetupError, OSError) as exc:
        print(f"stalwart nsexec: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"stalwart nsexec: cannot run {argv[0]!r}: {exc.strerror}", file=sys.stderr)
        return EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
