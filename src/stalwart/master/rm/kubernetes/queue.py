"""A rate-limited door for Kubernetes API calls.

:class:`RateLimitedApi` wraps a :class:`~stalwart.master.rm.kubernetes.client.KubeApi`: every call
takes
a token from a bucket (``qps`` tokens a second, at most ``burst`` saved up) and so waits when the
master calls too fast (thousands of trials starting at once do not flood the API server); calls
that fail with a retryable error (429, 5xx, network) are retried up to ``retries`` times with
exponential backoff. Watches take one token when they start and are not retried here (the
informer relists). Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Mapping
from typing import Any, TypeVar

from stalwart.master.rm.kubernetes.client import Kind, KubeApi, KubeError, WatchEvent

__all__ = ["RateLimitedApi", "TokenBucket"]

T = TypeVar("T")


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` at once; :meth:`take` waits for one."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()
        self.waited = 0.0
        """Seconds callers spent waiting, in total (for tests and logs)."""

    def delay(self) -> float:
        """Take a token; how long the caller must wait before using it (0: at once)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self.rate
            self.waited += wait
            return wait

    def take(self) -> None:
        wait = self.delay()
        if wait > 0:
            time.sleep(wait)


class RateLimitedApi(KubeApi):
    """``api`` behind a :class:`TokenBucket` with retries (see the module docstring)."""

    def __init__(
        self, api: KubeApi, *, qps: float, burst: int, retries: int = 4, backoff: float = 0.5
    ) -> None:
        self.api = api
        self.bucket = TokenBucket(qps, burst)
        self.retries = retries
        self.backoff = backoff
        self.calls = 0

    def _run(self, call: Callable[[], T]) -> T:
        attempt = 0
        while True:
            self.bucket.take()
            self.calls += 1
            try:
                return call()
            except KubeError as exc:
                if not exc.retryable or attempt >= self.retries:
                    raise
            time.sleep(min(8.0, self.backoff * 2**attempt))
            attempt += 1

    def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._run(lambda: self.api.create(kind, namespace, body))

    def replace(
        self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        return self._run(lambda: self.api.replace(kind, namespace, name, body))

    def delete(self, kind: Kind, namespace: str, name: str) -> None:
        self._run(lambda: self.api.delete(kind, namespace, name))

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return self._run(lambda: self.api.get(kind, namespace, name))

    def list(
        self, kind: Kind, namespace: str, label_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        return self._run(lambda: self.api.list(kind, namespace, label_selector))

    def watch(
        self,
        kind: Kind,
        namespace: str,
        resource_version: str,
        label_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Generator[WatchEvent, None, None]:
        self.bucket.take()
        self.calls += 1
        return self.api.watch(kind, namespace, resource_version, label_selector, timeout_seconds)

    def close(self) -> None:
        self.api.close()
