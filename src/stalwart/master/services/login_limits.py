"""Login rate limiting: failed logins counted per (username, client address).

After ``max_failures`` failed logins of one username from one address within ``window``
seconds, further attempts from that address for that username are refused (429, with the
seconds to wait) until ``window`` seconds have passed since the failure that reached the limit.
A successful login clears the count. Other addresses and other usernames are not affected, so
one client cannot lock a user out everywhere. The counts live in the master's memory (they
reset on restart) and are bounded: at most :data:`MAX_KEYS` keys, the oldest dropped first.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from stalwart.errors import TooManyRequestsError

__all__ = ["MAX_KEYS", "LoginLimiter"]

MAX_KEYS = 100_000
"""The most (username, address) pairs tracked at once."""


class LoginLimiter:
    """Counts failed logins; thread-safe (login runs in FastAPI's worker threads)."""

    def __init__(
        self,
        max_failures: int,
        window: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self._clock = clock
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def check(self, username: str, address: str) -> None:
        """TooManyRequestsError when ``username`` from ``address`` is locked out now."""
        key = (username.lower(), address)
        with self._lock:
            now = self._clock()
            times = self._recent(key, now)
            if len(times) < self.max_failures:
                return
            wait = math.ceil(times[-self.max_failures] + self.window - now)
        raise TooManyRequestsError(
            f"too many failed logins for user '{username}' from this address: try again in "
            f"{max(1, wait)} seconds",
            retry_after=wait,
        )

    def failed(self, username: str, address: str) -> None:
        """Record a failed login."""
        key = (username.lower(), address)
        with self._lock:
            now = self._clock()
            times = self._recent(key, now)
            times.append(now)
            self._failures[key] = times
            self._failures.move_to_end(key)
            while len(self._failures) > MAX_KEYS:
                self._failures.popitem(last=False)

    def succeeded(self, username: str, address: str) -> None:
        """Forget the failures of ``username`` from ``address``."""
        with self._lock:
            self._failures.pop((username.lower(), address), None)
