"""The transport under ``DistributedContext``: a small message hub hosted by a group's chief.

Contract:

- A group has ``size`` members, ranks ``0..size-1``. Rank 0 hosts a :class:`Hub` on a listener
  (TCP, or a Unix socket on one node) and every other rank connects a :class:`Spoke` to it.
  Building a hub blocks until every rank has joined; building a spoke blocks until it has joined
  (refused connections are retried, so members may start in any order). Either raises
  :class:`CollectiveTimeoutError` after ``setup_timeout_s``.
- Joining is authenticated before anything is unpickled: the hub sends a random nonce, the spoke
  answers ``HMAC-SHA256(key, nonce + rank)``. A stray connection or a wrong key is refused
  (the spoke raises :class:`CollectiveError`) and does not disturb the group.
- The one primitive is a *round*: every member sends ``(seq, op, payload)`` (pickled); the hub
  collects them all (in rank order, its own first), checks that everyone called the same ``op``
  at the same ``seq``, and answers every spoke with the same value. Collectives are rounds.
  Members must call rounds in step; a mismatch fails the round on every member with a
  :class:`CollectiveError` naming both calls.
- Nothing hangs: a member whose connection closes (it crashed, or closed the group) fails the
  round on the hub at once, and the hub then tells (best effort) and disconnects every spoke,
  which fail at once too; a round not complete within ``timeout_s`` raises
  :class:`CollectiveTimeoutError`. After any failure the member is closed and every later round
  raises. TCP keep-alive detects a peer whose host vanished.
- Values must pickle: a spoke's value that does not raises :class:`TypeError` before anything is
  sent (the group stays in step); the hub's fails the round for everyone.
- One thread at a time per member. :meth:`close` is idempotent.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import pickle
import secrets
import selectors
import shutil
import socket
import struct
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stalwart.errors import StalwartError

__all__ = [
    "CollectiveError",
    "CollectiveTimeoutError",
    "Hub",
    "Listener",
    "Spoke",
    "unix_sockets_available",
]

logger = logging.getLogger("stalwart.core")

PROTOCOL = "stalwart-collectives/1"
_HEADER = struct.Struct(">Q")
_MAX_HANDSHAKE = 4096
_HANDSHAKE_TIMEOUT_S = 10.0
_CHUNK = 1 << 20


class CollectiveError(StalwartError, RuntimeError):
    """A collective of ``DistributedContext`` failed: a worker crashed or left, the workers
    called different collectives, or the group could not be formed."""

    code = "collective_failed"


class CollectiveTimeoutError(CollectiveError, TimeoutError):
    """A collective (or the forming of the group) did not complete in time."""

    code = "collective_timeout"


def _mac(key: bytes, nonce: str, rank: int) -> str:
    return hmac.new(key, f"{nonce}:{rank}".encode(), hashlib.sha256).hexdigest()


def _tune(sock: socket.socket) -> None:
    """No Nagle delay, and keep-alive probes so a vanished host is noticed (TCP only)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 6)):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def _send(sock: socket.socket, data: bytes, deadline: float | None) -> None:
    sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.001))
    header = _HEADER.pack(len(data))
    if len(data) < 65536:
        sock.sendall(header + data)
    else:
        sock.sendall(header)
        sock.sendall(data)


def _recv_exactly(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.001))
        n = sock.recv_into(view[got:], min(size - got, _CHUNK))
        if n == 0:
            raise EOFError("connection closed")
        got += n
    return bytes(buf)


def _recv(sock: socket.socket, deadline: float | None, limit: int | None = None) -> bytes:
    (size,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size, deadline))
    if limit is not None and size > limit:
        raise ValueError(f"message of {size} bytes is over the limit of {limit}")
    return _recv_exactly(sock, size, deadline)


def _send_json(sock: socket.socket, value: dict[str, Any], deadline: float) -> None:
    _send(sock, json.dumps(value).encode(), deadline)


def _recv_json(sock: socket.socket, deadline: float) -> dict[str, Any]:
    value = json.loads(_recv(sock, deadline, _MAX_HANDSHAKE))
    if not isinstance(value, dict):
        raise ValueError("handshake message is not a JSON object")
    return value


def _pickled(value: Any, op: str) -> bytes:
    """``value`` pickled; :class:`TypeError` naming ``op`` when it cannot be."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise TypeError(f"value for {op} cannot be pickled: {exc}") from exc


class Listener:
    """Where a hub will accept its spokes: bound and listening at once (so spokes may connect
    early), described by :attr:`endpoint` (``tcp://HOST:PORT`` or ``unix:PATH``)."""

    def __init__(self, sock: socket.socket, endpoint: str, cleanup: Path | None = None) -> None:
        self.sock = sock
        self.endpoint = endpoint
        self._cleanup = cleanup

    @classmethod
    def tcp(cls, host: str, port: int, advertise: str | None = None) -> Listener:
        """Listen on ``host:port`` (``port`` 0: any free port); the endpoint names ``advertise``
        (default ``host``). :class:`CollectiveError` when the port cannot be had."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            sock = socket.create_server((host, port), family=family, reuse_port=False)
        except OSError as exc:
            raise CollectiveError(
                f"cannot listen on {host}:{port} for the chief's collectives: "
                f"{exc.strerror or exc}",
                hint="another process holds the port; a launcher sets "
                "INTER_TRAIN_PROCESS_COMM_PORT_1 per allocation, or pass pub_port/port_offset",
            ) from exc
        name = advertise or host
        shown = f"[{name}]" if ":" in name else name
        return cls(sock, f"tcp://{shown}:{sock.getsockname()[1]}")

    @classmethod
    def unix(cls) -> Listener:
        """Listen on a Unix socket in a new private directory (removed by :meth:`close`)."""
        directory = Path(tempfile.mkdtemp(prefix="stalwart-ipc-"))
        path = directory / "hub.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            sock.listen()
        except OSError:
            sock.close()
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return cls(sock, f"unix:{path}", cleanup=directory)

    def close(self) -> None:
        """Stop listening (idempotent)."""
        self.sock.close()
        if self._cleanup is not None:
            shutil.rmtree(self._cleanup, ignore_errors=True)
            self._cleanup = None


def _connect(endpoint: str, timeout: float) -> socket.socket:
    if endpoint.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(endpoint[len("unix:") :])
        except OSError:
            sock.close()
            raise
        return sock
    if not endpoint.startswith("tcp://"):
        raise ValueError(f"unknown endpoint {endpoint!r}")
    host, _, port = endpoint[len("tcp://") :].rpartition(":")
    return socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)


class _Member:
    """What hubs and spokes share: a name for messages, timeouts, the sequence and the state."""

    def __init__(self, name: str, timeout_s: float | None) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._seq = 0
        self._failure: CollectiveError | None = None
        self._closed = False

    def _deadline(self) -> float | None:
        return None if self.timeout_s is None else time.monotonic() + self.timeout_s

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise CollectiveError(
                f"{self.name}: the group failed earlier and is closed ({self._failure.message})"
            )
        if self._closed:
            raise CollectiveError(f"{self.name}: the group is closed")

    def _fail(self, error: CollectiveError) -> CollectiveError:
        self._failure = error
        self.close()
        return error

    def close(self) -> None:
        raise NotImplementedError


class Hub(_Member):
    """Rank 0 of a group: accepts the spokes, then runs rounds (module contract)."""

    def __init__(
        self,
        listener: Listener,
        size: int,
        key: bytes,
        *,
        name: str,
        setup_timeout_s: float,
        timeout_s: float | None,
    ) -> None:
        super().__init__(name, timeout_s)
        self.size = size
        self._key = key
        self._peers: dict[int, socket.socket] = {}
        self._buffers: dict[int, bytearray] = {}
        try:
            self._accept_all(listener, time.monotonic() + setup_timeout_s, setup_timeout_s)
        except BaseException:
            self.close()
            raise
        finally:
            listener.close()

    def _accept_all(self, listener: Listener, deadline: float, setup_timeout_s: float) -> None:
        while len(self._peers) < self.size - 1:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = [r for r in range(1, self.size) if r not in self._peers]
                raise CollectiveTimeoutError(
                    f"{self.name}: ranks {missing} of {self.size} did not connect to the chief "
                    f"at {listener.endpoint} within {setup_timeout_s:g}s",
                    hint="every worker must build its DistributedContext; check that the "
                    "workers can reach the chief's address and port",
                )
            listener.sock.settimeout(remaining)
            try:
                conn, _ = listener.sock.accept()
            except TimeoutError:
                continue
            rank = self._handshake(conn, min(deadline, time.monotonic() + _HANDSHAKE_TIMEOUT_S))
            if rank is None:
                conn.close()
                continue
            conn.settimeout(None)
            _tune(conn)
            self._peers[rank] = conn
            self._buffers[rank] = bytearray()

    def _handshake(self, conn: socket.socket, deadline: float) -> int | None:
        """The rank of a spoke that proved it knows the key, else None (it is told why)."""
        nonce = secrets.token_hex(16)
        try:
            _send_json(conn, {"protocol": PROTOCOL, "nonce": nonce, "size": self.size}, deadline)
            hello = _recv_json(conn, deadline)
            rank = hello.get("rank")
            problem = self._refusal(hello, nonce)
            if problem is not None or not isinstance(rank, int):
                logger.warning("%s: refused a connection: %s", self.name, problem)
                _send_json(conn, {"error": problem}, deadline)
                return None
            _send_json(conn, {"ok": True}, deadline)
            return rank
        except (OSError, EOFError, ValueError) as exc:
            logger.warning("%s: a connection failed its handshake: %s", self.name, exc)
            return None

    def _refusal(self, hello: dict[str, Any], nonce: str) -> str | None:
        """Why a spoke's hello is refused, or None."""
        rank = hello.get("rank")
        mac = hello.get("mac")
        if hello.get("protocol") != PROTOCOL:
            return f"protocol {hello.get('protocol')!r} is not {PROTOCOL!r}"
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 < rank < self.size:
            return f"rank {rank!r} is not in [1, {self.size})"
        if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(self._key, nonce, rank)):
            return "wrong key (the workers are not of the same allocation)"
        if rank in self._peers:
            return f"rank {rank} has already joined"
        return None

    def round(self, op: str, payload: Any, answer: Callable[[list[Any]], Any]) -> list[Any]:
        """Collect every member's payload (the hub's first), send ``answer(payloads)`` to every
        spoke, and return the payloads (module contract)."""
        self._check_usable()
        self._seq += 1
        seq = self._seq
        deadline = self._deadline()
        received = self._collect(op, seq, deadline)
        values: list[Any] = [payload]
        for rank in range(1, self.size):
            their_seq, their_op, value = received[rank]
            if (their_seq, their_op) != (seq, op):
                message = (
                    f"{self.name}: collective mismatch: rank 0 called {op} (call #{seq}) but "
                    f"rank {rank} called {their_op} (call #{their_seq}); every worker must call "
                    "the same collectives in the same order"
                )
                raise self._fail(CollectiveError(message))
            values.append(value)
        try:
            reply = _pickled(("ok", answer(values)), op)
        except TypeError as exc:
            raise self._fail(CollectiveError(f"{self.name}: the chief's {exc}")) from exc
        deadline = self._deadline()  # the answer gets its own time, however long collecting took
        for rank, peer in self._peers.items():
            try:
                _send(peer, reply, deadline)
            except TimeoutError:
                raise self._fail(self._timeout(op, seq, [rank], "take the answer of")) from None
            except OSError:
                raise self._fail(self._left(op, seq, rank)) from None
        return values

    def _collect(self, op: str, seq: int, deadline: float | None) -> dict[int, Any]:
        received: dict[int, Any] = {}
        with selectors.DefaultSelector() as selector:
            for rank, peer in self._peers.items():
                peer.setblocking(False)
                selector.register(peer, selectors.EVENT_READ, rank)
            try:
                self._read_frames(selector, received, op, seq, deadline)
            finally:
                for peer in self._peers.values():
                    peer.setblocking(True)
        return received

    def _read_frames(
        self,
        selector: selectors.BaseSelector,
        received: dict[int, Any],
        op: str,
        seq: int,
        deadline: float | None,
    ) -> None:
        for rank in list(self._peers):  # a frame may have arrived with the last one's bytes
            self._take_frame(rank, received, selector)
        while len(received) < self.size - 1:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                missing = [r for r in range(1, self.size) if r not in received]
                raise self._fail(self._timeout(op, seq, missing, "call"))
            for key, _ in selector.select(remaining):
                rank = int(key.data)
                try:
                    chunk = self._peers[rank].recv(_CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    raise self._fail(self._left(op, seq, rank))
                self._buffers[rank] += chunk
                self._take_frame(rank, received, selector)

    def _take_frame(
        self, rank: int, received: dict[int, Any], selector: selectors.BaseSelector
    ) -> None:
        buf = self._buffers[rank]
        if rank in received or len(buf) < _HEADER.size:
            return
        (size,) = _HEADER.unpack_from(buf)
        if len(buf) < _HEADER.size + size:
            return
        frame = bytes(buf[_HEADER.size : _HEADER.size + size])
        del buf[: _HEADER.size + size]
        try:
            received[rank] = pickle.loads(frame)
        except Exception as exc:
            message = f"{self.name}: the message of rank {rank} cannot be unpickled: {exc}"
            raise self._fail(CollectiveError(message)) from exc
        selector.unregister(self._peers[rank])

    def _timeout(
        self, op: str, seq: int, ranks: Sequence[int], what: str
    ) -> CollectiveTimeoutError:
        return CollectiveTimeoutError(
            f"{self.name}: ranks {list(ranks)} did not {what} {op} (call #{seq}) within "
            f"{self.timeout_s:g}s",
            hint="a worker is stuck, or the workers call different collectives",
        )

    def _left(self, op: str, seq: int, rank: int) -> CollectiveError:
        return CollectiveError(
            f"{self.name}: rank {rank} left the group during {op} (call #{seq}): its "
            "connection closed (it crashed, or closed its DistributedContext)"
        )

    def close(self) -> None:
        """Disconnect every spoke, first telling them why when the group failed."""
        if self._closed:
            return
        self._closed = True
        if self._failure is not None:
            notice = pickle.dumps(("error", self._failure.message))
            for peer in self._peers.values():
                with contextlib.suppress(OSError):
                    peer.setblocking(True)
                    _send(peer, notice, time.monotonic() + 1.0)
        for peer in self._peers.values():
            with contextlib.suppress(OSError):
                peer.shutdown(socket.SHUT_RDWR)
            peer.close()
        self._peers.clear()


class Spoke(_Member):
    """Rank ``rank`` > 0 of a group: connected to the hub at ``endpoint`` (module contract)."""

    def __init__(
        self,
        endpoint: str,
        rank: int,
        key: bytes,
        *,
        name: str,
        setup_timeout_s: float,
        timeout_s: float | None,
    ) -> None:
        super().__init__(name, timeout_s)
        self.endpoint = endpoint
        self.rank = rank
        deadline = time.monotonic() + setup_timeout_s
        self._sock = self._join(key, deadline, setup_timeout_s)

    def _join(self, key: bytes, deadline: float, setup_timeout_s: float) -> socket.socket:
        pause = 0.05
        last: BaseException | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CollectiveTimeoutError(
                    f"{self.name}: rank {self.rank} could not reach the chief at "
                    f"{self.endpoint} within {setup_timeout_s:g}s (last error: {last})",
                    hint="the chief (rank 0) must build its DistributedContext too, and its "
                    "address and port must be reachable from every worker",
                )
            try:
                sock = _connect(self.endpoint, min(remaining, _HANDSHAKE_TIMEOUT_S))
            except OSError as exc:  # not listening yet, or not reachable yet
                last = exc
                time.sleep(min(pause, max(remaining, 0)))
                pause = min(pause * 2, 1.0)
                continue
            try:
                self._handshake(sock, key, min(deadline, time.monotonic() + 60.0))
            except BaseException:
                sock.close()
                raise
            sock.settimeout(None)
            _tune(sock)
            return sock

    def _handshake(self, sock: socket.socket, key: bytes, deadline: float) -> None:
        try:
            hello = _recv_json(sock, deadline)
            if hello.get("protocol") != PROTOCOL:
                raise ValueError(f"it speaks {hello.get('protocol')!r}, not {PROTOCOL!r}")
            nonce = str(hello.get("nonce"))
            mac = _mac(key, nonce, self.rank)
            _send_json(sock, {"protocol": PROTOCOL, "rank": self.rank, "mac": mac}, deadline)
            answer = _recv_json(sock, deadline)
        except (OSError, EOFError, ValueError) as exc:
            raise CollectiveError(
                f"{self.name}: rank {self.rank} could not join the chief at {self.endpoint}: {exc}"
            ) from exc
        if answer.get("ok") is not True:
            raise CollectiveError(
                f"{self.name}: the chief at {self.endpoint} refused rank {self.rank}: "
                f"{answer.get('error')}"
            )

    def round(self, op: str, payload: Any) -> Any:
        """Send ``payload`` for ``op`` and return the hub's answer (module contract)."""
        self._check_usable()
        data = _pickled((self._seq + 1, op, payload), op)
        self._seq += 1
        seq = self._seq
        deadline = self._deadline()
        try:
            _send(self._sock, data, deadline)
            reply = _recv(self._sock, deadline)
        except TimeoutError:
            raise self._fail(
                CollectiveTimeoutError(
                    f"{self.name}: rank {self.rank} waited {self.timeout_s:g}s in {op} "
                    f"(call #{seq}) for the chief at {self.endpoint}",
                    hint="a worker is stuck, or the workers call different collectives",
                )
            ) from None
        except (OSError, EOFError):
            raise self._fail(
                CollectiveError(
                    f"{self.name}: the chief at {self.endpoint} closed the connection during "
                    f"{op} (call #{seq}) of rank {self.rank}: the chief crashed or left the "
                    "group, or another worker failed"
                )
            ) from None
        try:
            status, value = pickle.loads(reply)
        except Exception as exc:
            message = f"{self.name}: the chief's answer to {op} cannot be unpickled: {exc}"
            raise self._fail(CollectiveError(message)) from exc
        if status != "ok":
            raise self._fail(CollectiveError(str(value)))
        return value

    def close(self) -> None:
        """Disconnect from the hub (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def unix_sockets_available() -> bool:
    """Whether local groups can use Unix sockets here."""
    return hasattr(socket, "AF_UNIX") and os.name == "posix"
