"""Run a command in a private mount namespace with some bind mounts (``python -m`` entry point).

``python -I -m stalwart.agent.nsexec [--user] [--as UID:GID] [--chdir DIR] --bind SRC:DST
[--bind SRC:DST ...] -- ARGV...``

1. ``unshare(CLONE_NEWNS)`` (with ``--user``: ``CLONE_NEWUSER | CLONE_NEWNS`` first, mapping the
   caller's uid and gid to themselves, so that an unprivileged caller may mount in its own
   namespaces and the command still runs as the same user);
2. marks every mount private (``MS_REC | MS_PRIVATE`` on ``/``), so nothing below leaks to the
   host or to other tasks;
3. bind-mounts each ``SRC`` on ``DST`` in order (``MS_BIND | MS_REC``), creating ``DST`` when it is
   missing (a later ``DST`` may lie inside an earlier one);
4. with ``--as`` (root only), becomes that user and group, with no supplementary groups
   (:func:`drop_privileges`): the command cannot read what only root may;
5. with ``--chdir``, changes to ``DIR`` (as the new user: a directory it cannot enter fails);
6. ``execvp`` s ``ARGV`` with the environment, session and process group it was given (and the
   working directory, unless ``--chdir``): the command keeps this process's pid, so the
   caller's signals and ``waitid`` reach it and its exit code is the caller's to see.

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
from dataclasses import dataclass, field

__all__ = ["Bind", "Options", "drop_privileges", "main", "parse_args", "parse_identity"]

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


@dataclass
class Options:
    """The parsed command line (see the module docstring)."""

    binds: list[Bind] = field(default_factory=list)
    user: bool = False
    check: bool = False
    identity: tuple[int, int] | None = None  # ``--as UID:GID``
    chdir: str | None = None
    argv: list[str] = field(default_factory=list)


def parse_identity(text: str) -> tuple[int, int]:
    """``(uid, gid)`` from ``UID:GID`` (both numbers); ValueError otherwise."""
    uid, sep, gid = text.partition(":")
    if not sep or not uid.isdigit() or not gid.isdigit():
        raise ValueError(f"--as wants UID:GID (numbers), got {text!r}")
    return int(uid), int(gid)


def parse_args(args: Sequence[str]) -> Options:
    """The options of a command line (see the module docstring)."""
    out = Options()
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            break
        if arg == "--user":
            out.user = True
        elif arg == "--check":
            out.check = True
        elif arg == "--as" and rest:
            try:
                out.identity = parse_identity(rest.pop(0))
            except ValueError as exc:
                raise _SetupError(str(exc)) from None
        elif arg == "--chdir" and rest:
            out.chdir = rest.pop(0)
        elif arg == "--bind" and rest:
            source, sep, target = rest.pop(0).rpartition(":")
            if not sep or not source or not target:
                raise _SetupError("--bind wants SRC:DST")
            out.binds.append((source, target))
        else:
            raise _SetupError(f"unknown argument {arg!r}")
    if not out.check and not rest:
        raise _SetupError("no command after --")
    out.argv = rest
    return out


def drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good, with no supplementary groups (real, effective and saved
    ids all change, so the process cannot take root back). Raises OSError when not allowed."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


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
        options = parse_args(sys.argv[1:] if args is None else args)
        argv = options.argv
        libc = _libc()
        _enter(libc, options.user)
        for source, target in options.binds:
            _bind(libc, source, target)
        if options.check:
            return 0 if all(_same(s, t) for s, t in options.binds) else EXIT_FAILED
        if options.identity is not None:
            try:
                drop_privileges(*options.identity)
            except OSError as exc:
                raise _SetupError(
                    f"cannot become uid:gid {options.identity[0]}:{options.identity[1]}: "
                    f"{exc.strerror or exc}"
                ) from exc
        if options.chdir is not None:
            try:
                os.chdir(options.chdir)
            except OSError as exc:
                raise _SetupError(f"cannot enter {options.chdir}: {exc.strerror or exc}") from exc
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
