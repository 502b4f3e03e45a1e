"""What keeps a master serving from several worker processes one master (``workers`` > 1).

:mod:`stalwart.master.supervisor` forks the workers, all accepting on one listening socket;
each runs the whole app. Three things make them behave as the single process they replace:

- **One state lock** (:class:`StateLock`, ``MasterState.lifecycle``): a reentrant thread lock
  that, across workers, also holds an exclusive ``flock`` on ``<home>/run/state.lock`` while
  its outermost holder holds it. The read-decide-write steps that change experiment, trial,
  allocation and container states (the cluster loop's, agent syncs', users' actions) never
  interleave, whichever worker runs them. In a single process it is a plain ``RLock``.
- **One leader** (:class:`Leadership`): the cluster loop, the webhook deliverer and the
  retention schedule run in exactly one worker, the one holding ``flock`` on
  ``<home>/run/leader.lock`` (which holds its pid). A worker that dies releases it with its
  last file descriptor; another takes it within :data:`LEADER_POLL_S` and starts them, as a
  restarted master does (agents reattach, searchers restore).
- **Notifications that reach every worker** (:class:`Relay`): each worker binds a Unix
  datagram socket in ``<home>/run/workers/`` (:func:`relay_dir`); a notification (a key of the
  :class:`~stalwart.master.state.Notifier`: log lines, an agent's wake-up, a preemption; a hint
  to the cluster loop; a webhook wake) is sent to every other worker, which delivers it as if it
  had been raised there. The loop's round counters, which agent syncs wait on, live in a shared
  memory-mapped file (:class:`SharedCounters`), so every worker reads the leader's.

Why files and sockets rather than a PostgreSQL advisory lock and LISTEN/NOTIFY: a master's
workers share one host and one home directory, so these work the same on SQLite and PostgreSQL;
a lock held through a file descriptor can neither outlive its process nor be lost while the
process lives (an advisory lock goes with its database session, which PostgreSQL may terminate
under a running leader); and a datagram costs a few microseconds, with no database round trip.

Notifications are wake-ups, not data: a worker that misses one (its socket buffer full) answers
a long-poll at its timeout instead of at once; the database stays the truth.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import mmap
import os
import secrets
import socket
import stat
import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

__all__ = [
    "LEADER_POLL_S",
    "Leadership",
    "Relay",
    "SharedCounters",
    "StateLock",
    "run_dir",
]

log = logging.getLogger("stalwart.master")

LEADER_POLL_S = 1.0
"""How often a worker that is not the leader tries to become it."""

_SEND_TIMEOUT_S = 0.05
"""The longest a notification waits for room in a busy worker's socket buffer."""


def run_dir(home: Path) -> Path:
    """``<home>/run``: the workers' lock files, sockets and shared counters."""
    return home / "run"


_SOCKET_NAME_MAX = 32
"""Room for a worker's socket name (``<pid>-<8 hex digits>.sock``)."""
_SOCKET_PATH_MAX = 107
"""The longest path a Unix socket's address holds (108 bytes with the final NUL, on Linux)."""


def relay_dir(home: Path) -> Path:
    """Where the workers' sockets live: ``<home>/run/workers``, or, when that is too long for a
    Unix socket's address (a deep home), ``stalwart-<hash of the home>`` in the system's
    temporary directory (the same for every worker of the master)."""
    preferred = run_dir(home) / "workers"
    if len(os.fsencode(preferred)) + 1 + _SOCKET_NAME_MAX <= _SOCKET_PATH_MAX:
        return preferred
    digest = hashlib.sha256(os.fsencode(home.resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"stalwart-{digest}"


class StateLock:
    """A reentrant lock: a thread lock, plus an exclusive ``flock`` on ``path`` (when given)
    while held, so it also excludes the other workers (see the module docstring).

    Used as ``with lock:``. The file lock is taken by the outermost acquisition only; the
    thread lock is taken first, so at most one thread of a process waits on the file.
    """

    def __init__(self, path: Path | None = None) -> None:
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    @property
    def shared(self) -> bool:
        """Whether it excludes other processes too."""
        return self._fd is not None

    def acquire(self) -> None:
        self._thread_lock.acquire()
        if self._depth == 0 and self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except BaseException:
                self._thread_lock.release()
                raise
        self._depth += 1

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._thread_lock.release()

    def __enter__(self) -> StateLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


class Leadership:
    """Exactly one worker leads: it holds ``flock`` on ``path`` (see the module docstring).

    :meth:`start` tries at once and then every :data:`LEADER_POLL_S` in a thread until it
    leads; then it calls ``on_lead`` (once, in that thread) and holds the lock until the
    process exits or :meth:`stop` is called.
    """

    def __init__(self, path: Path, on_lead: Callable[[], None]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._on_lead = on_lead
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.leading = threading.Event()
        """Set once this worker leads."""

    def try_lead(self) -> bool:
        """Take the lock if it is free (no wait); whether this worker leads now."""
        if self.leading.is_set():
            return True
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        os.ftruncate(self._fd, 0)  # the leader's pid, for operators and tests
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
        self.leading.set()
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="stalwart-leader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.try_lead():
                log.info("worker %d leads: it runs the cluster loop", os.getpid())
                self._on_lead()
                return
            self._stop.wait(LEADER_POLL_S)

    def stop(self) -> None:
        """Stop trying (the caller stops what ``on_lead`` started); the lock is released with
        the process."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)


class SharedCounters:
    """Two 64-bit counters in a memory-mapped file every worker maps (``path``), or in this
    process's memory when ``path`` is None. Written by the leader under the state lock; read by
    anyone."""

    _FORMAT = struct.Struct("<qq")

    def __init__(self, path: Path | None = None) -> None:
        self._map: mmap.mmap | bytearray
        if path is None:
            self._map = bytearray(self._FORMAT.size)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if os.fstat(fd).st_size < self._FORMAT.size:
                os.ftruncate(fd, self._FORMAT.size)
            self._map = mmap.mmap(fd, self._FORMAT.size)
        finally:
            os.close(fd)

    def read(self) -> tuple[int, int]:
        first, second = self._FORMAT.unpack_from(self._map, 0)
        return int(first), int(second)

    def write(self, first: int, second: int) -> None:
        self._FORMAT.pack_into(self._map, 0, first, second)


def _private_directory(directory: Path) -> None:
    """Make ``directory`` (mode 0700) or check that it is a directory of this user, not a link:
    another user must not be able to send the workers notifications or take their names.
    Raises PermissionError otherwise."""
    directory.mkdir(parents=True, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise PermissionError(
            f"{directory} is not a directory of this user: the master's workers keep their "
            "sockets there; remove it and start the master again"
        )
    os.chmod(directory, 0o700)


class Relay:
    """Sends notifications to every other worker and hands theirs to ``deliver`` (see the
    module docstring).

    Each worker binds ``<directory>/<pid>-<random>.sock``; :meth:`send` sends a datagram to
    every other socket there (re-reading the directory when it changed; removing the sockets
    of workers that are gone). :meth:`start` runs a thread that calls ``deliver(message)`` for each
    datagram received; ``deliver`` must not block.
    """

    def __init__(self, directory: Path, deliver: Callable[[bytes], None]) -> None:
        _private_directory(directory)
        self._directory = directory
        self._deliver = deliver
        self._path = directory / f"{os.getpid()}-{secrets.token_hex(4)}.sock"
        self._path.unlink(missing_ok=True)
        self._inbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._inbox.bind(str(self._path))
        except OSError:
            self._inbox.close()
            raise
        self._outbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._outbox.settimeout(_SEND_TIMEOUT_S)
        self._send_lock = threading.Lock()
        self._peers: list[str] = []
        self._listed_at: int | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self.dropped = 0
        """Notifications not delivered because a worker's buffer stayed full."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._receive, name="stalwart-relay", daemon=True)
        self._thread.start()

    def send(self, message: bytes) -> None:
        """Send ``message`` to every other worker (thread-safe; never raises)."""
        with self._send_lock:
            if self._closed:
                return
            for peer in self._current_peers():
                try:
                    self._outbox.sendto(message, peer)
                except (ConnectionRefusedError, FileNotFoundError):
                    self._forget(peer)  # that worker is gone
                except (TimeoutError, BlockingIOError):
                    self.dropped += 1
                except OSError as exc:
                    if exc.errno != errno.ENOBUFS:
                        raise
                    self.dropped += 1

    def _current_peers(self) -> list[str]:
        try:
            changed = os.stat(self._directory).st_mtime_ns
        except FileNotFoundError:
            return []
        if changed != self._listed_at:
            self._listed_at = changed
            own = self._path.name
            self._peers = [
                str(self._directory / name)
                for name in sorted(os.listdir(self._directory))
                if name.endswith(".sock") and name != own
            ]
        return self._peers

    def _forget(self, peer: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(peer)
        self._listed_at = None

    def _receive(self) -> None:
        while True:
            try:
                message = self._inbox.recv(65536)
            except OSError:
                return
            if self._closed:
                return
            try:
                self._deliver(message)
            except Exception:  # a bad message must not end the relay
                log.exception("could not deliver a notification from another worker")

    def close(self) -> None:
        """Stop receiving and remove this worker's socket."""
        with self._send_lock:
            self._closed = True
        with contextlib.suppress(OSError):
            self._outbox.sendto(b"", str(self._path))  # wakes the receiving thread
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._inbox.close()
        self._outbox.close()
        self._path.unlink(missing_ok=True)
