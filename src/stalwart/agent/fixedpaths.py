"""Run a command with Determined's fixed paths pointing at its own files, one such command per
node at a time (``python -m`` entry point): the agent's fallback where private mount namespaces
are not available.

``python -I -m stalwart.agent.fixedpaths [--lock PATH] [--as UID:GID] --link SRC:DST
[--link SRC:DST ...] -- ARGV...``

1. takes an exclusive ``flock`` on the lock file (default :data:`LOCK_PATH`, one per node);
   when another command holds it, writes one line saying so to stderr and waits;
2. points each ``DST`` at ``SRC`` with a symbolic link (a link already there, or an empty
   directory such as a mount point the namespaces left, is replaced; anything else is an error);
3. with ``--as`` (root only), becomes that user and group with no supplementary groups
   (:func:`stalwart.agent.nsexec.drop_privileges`);
4. ``execvp`` s ``ARGV`` with the lock's descriptor kept open, so the lock is held until the
   command and every process that inherited the descriptor have exited, however they end (a
   SIGKILL included): the next waiter then takes the lock and re-points the links.

The exec keeps the pid, so the runner's signals, ``waitid`` and exit code are the command's. A
failure before the exec writes ``stalwart fixedpaths: ...`` to stderr and exits 126 (127 when
the command is not found). The links stay after the command ends;
:func:`stalwart.agent.isolation.restore_mount_points` turns them back into empty directories
before a namespace needs them. Standard library only, nothing runs at import time.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Sequence

from stalwart.agent.nsexec import drop_privileges, parse_identity

__all__ = ["LOCK_PATH", "Link", "main", "parse_args", "point"]

LOCK_PATH = "/tmp/stalwart-determined-paths.lock"
"""One lock per node: every agent on it (whatever its home) serializes on this file."""

EXIT_FAILED = 126
EXIT_NOT_FOUND = 127

Link = tuple[str, str]
"""``(source, target)``: the task's own path, and the fixed path that is made to point at it."""

WAITING = (
    "stalwart: waiting for /run/determined: another task written for the official harness "
    "is using it, and without private mount namespaces such tasks run one at a time on a node"
)
"""The line a command gets on its stderr when it has to wait for the lock."""


HINT = (
    "stalwart fixedpaths: run the agent as root, or allow unprivileged user namespaces so that "
    "each task gets its own /run/determined (docs/cluster.md)"
)
"""The second line of a failure for lack of permission: what the operator can do."""


class _SetupError(Exception):
    """A step before the exec failed (the message says which)."""


def parse_args(args: Sequence[str]) -> tuple[str, list[Link], list[str], tuple[int, int] | None]:
    """``(lock_path, links, argv, identity)`` from the command line (see the module docstring);
    ``identity`` is ``--as``'s ``(uid, gid)``, None without it."""
    lock, links, rest = LOCK_PATH, [], list(args)
    identity: tuple[int, int] | None = None
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            break
        if arg == "--lock" and rest:
            lock = rest.pop(0)
        elif arg == "--as" and rest:
            try:
                identity = parse_identity(rest.pop(0))
            except ValueError as exc:
                raise _SetupError(str(exc)) from None
        elif arg == "--link" and rest:
            source, sep, target = rest.pop(0).rpartition(":")
            if not sep or not source or not target:
                raise _SetupError("--link wants SRC:DST")
            links.append((source, target))
        else:
            raise _SetupError(f"unknown argument {arg!r}")
    if not rest:
        raise _SetupError("no command after --")
    return lock, links, rest, identity


def _lock(path: str) -> int:
    """An inheritable descriptor holding the exclusive lock on ``path`` (waits for it)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise _SetupError(f"cannot open the lock file {path}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(WAITING, file=sys.stderr, flush=True)
        fcntl.flock(fd, fcntl.LOCK_EX)
    os.set_inheritable(fd, True)
    return fd


def point(source: str, target: str) -> None:
    """Make ``target`` a symbolic link to ``source`` (atomically where a link is there already).

    Raises OSError (with the target named) when ``target`` is a file or a non-empty directory,
    or cannot be written.
    """
    if os.path.isdir(target) and not os.path.islink(target):
        try:
            os.rmdir(target)  # an empty mount point: namespaces would create it again
        except OSError as exc:
            raise OSError(exc.errno, f"{target} is a directory in use ({exc.strerror})") from exc
    elif os.path.lexists(target) and not os.path.islink(target):
        raise OSError(f"{target} exists and is not a link or a directory")
    parent = os.path.dirname(target) or "."
    os.makedirs(parent, exist_ok=True)
    temporary = os.path.join(parent, f".{os.path.basename(target)}.{os.getpid()}")
    os.symlink(source, temporary)
    os.replace(temporary, target)


def main(args: Sequence[str] | None = None) -> int:
    """Lock, link, then exec the command (returns only on failure)."""
    try:
        lock, links, argv, identity = parse_args(sys.argv[1:] if args is None else args)
        _lock(lock)
        for source, target in links:
            point(source, target)
        if identity is not None:
            drop_privileges(*identity)
    except (_SetupError, OSError) as exc:
        print(f"stalwart fixedpaths: {exc}", file=sys.stderr, flush=True)
        if isinstance(exc, PermissionError):
            print(HINT, file=sys.stderr, flush=True)
        return EXIT_FAILED
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"stalwart fixedpaths: cannot run {argv[0]!r}: {exc.strerror}", file=sys.stderr)
        return EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
