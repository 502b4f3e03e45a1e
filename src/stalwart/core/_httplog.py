"""Keeps the harness's own HTTP requests out of the trial's log.

httpx logs every request at INFO (``HTTP Request: POST .../metrics/batch "HTTP/1.1 200 OK"``)
and httpcore traces each connection step at DEBUG. A training script that configures logging
(``logging.basicConfig(level=logging.INFO)``, as Determined's examples do) would therefore get
one such line per metrics report, checkpoint report or preemption poll, and those lines would
be shipped into the trial's log.

Contract:

- :func:`harness_requests` marks the requests made inside it (in this thread or asyncio task
  only: the mark is a :class:`contextvars.ContextVar`) as the harness's own;
  :class:`stalwart.core._client.Session` sends every request inside it.
- :func:`install` (idempotent, called when the first session is made) adds
  :data:`FILTER` to the ``httpx`` logger and to each of httpcore's loggers; the filter drops
  exactly the records logged while a harness request is marked, at every level.
- The user's own httpx requests (to any host, the master included) are made outside the mark
  and keep their log lines.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator

__all__ = ["FILTER", "HTTP_LOGGERS", "harness_requests", "install"]

HTTP_LOGGERS = (
    "httpx",
    "httpcore.connection",
    "httpcore.connection_pool",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)
"""The loggers httpx and httpcore log requests on (a logger's filters do not apply to records
of its children, so each one gets the filter)."""

_IN_HARNESS_REQUEST: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "stalwart_harness_request", default=False
)


class _HarnessRequestFilter(logging.Filter):
    """Drops records logged while a harness request is in flight in the same context."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _IN_HARNESS_REQUEST.get()


FILTER = _HarnessRequestFilter("stalwart.core harness requests")
"""The one filter instance (adding it twice to a logger is a no-op)."""


def install() -> None:
    """Add :data:`FILTER` to every logger of :data:`HTTP_LOGGERS` (idempotent)."""
    for name in HTTP_LOGGERS:
        logging.getLogger(name).addFilter(FILTER)


@contextlib.contextmanager
def harness_requests() -> Iterator[None]:
    """Within this block, this context's httpx/httpcore log records are the harness's own."""
    token = _IN_HARNESS_REQUEST.set(True)
    try:
        yield
    finally:
        _IN_HARNESS_REQUEST.reset(token)
