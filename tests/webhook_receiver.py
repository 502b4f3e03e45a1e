"""A real HTTP webhook receiver on loopback, for tests.

``Receiver`` serves ``http://127.0.0.1:<port>/<path>`` from a thread. Each POST is recorded
(path, headers, body, time); its answer is the next status planned for its path (``plan``),
else 200. A path planned with ``HANG`` holds the request until the receiver stops (or 60 s), as
a receiver that never answers. ``wait`` returns once a path got a number of posts, or raises
after a deadline.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["HANG", "Post", "Receiver", "receiver"]

HANG = -1
"""A planned "status" that never answers."""


@dataclass(frozen=True)
class Post:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: str
    at: float


class Receiver:
    """See the module docstring."""

    def __init__(self) -> None:
        self.posts: list[Post] = []
        self._plans: dict[str, deque[int]] = defaultdict(deque)
        self._lock = threading.Condition()
        self._release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                post = Post(self.path, dict(self.headers.items()), body, time.monotonic())
                with owner._lock:
                    owner.posts.append(post)
                    plan = owner._plans[self.path]
                    status = plan.popleft() if plan else 200
                    owner._lock.notify_all()
                if status == HANG:
                    owner._release.wait(60)
                    return
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"

    def plan(self, path: str, *statuses: int) -> None:
        """Answer the next posts to ``path`` with ``statuses`` in order (then 200)."""
        with self._lock:
            self._plans["/" + path.lstrip("/")].extend(statuses)

    def to(self, path: str) -> list[Post]:
        with self._lock:
            return [p for p in self.posts if p.path == "/" + path.lstrip("/")]

    def wait(self, path: str, count: int = 1, timeout: float = 60.0) -> list[Post]:
        """The posts to ``path`` once there are at least ``count`` (AssertionError after
        ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.to_unlocked(path)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    got = len(self.to_unlocked(path))
                    raise AssertionError(f"{path}: {got} post(s), wanted {count}, in {timeout} s")
                self._lock.wait(left)
            return self.to_unlocked(path)

    def to_unlocked(self, path: str) -> list[Post]:
        return [p for p in self.posts if p.path == "/" + path.lstrip("/")]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def receiver() -> Iterator[Receiver]:
    """A started receiver, stopped afterwards."""
    found = Receiver()
    found.start()
    try:
        yield found
    finally:
        found.stop()
