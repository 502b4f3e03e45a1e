"""ASGI middleware: conditional GETs of the API's JSON answers (ETag / ``If-None-Match``).

Contract:

- A ``GET`` under ``/api/`` answered ``200`` with ``Content-Type: application/json`` and a
  ``Content-Length`` (a whole body, not a stream) gets a strong ``ETag`` (a hash of the body's
  bytes) and ``Cache-Control: no-cache`` (a browser or client may keep it but must ask again
  before using it).
- Such a request whose ``If-None-Match`` names that tag (or is ``*``) is answered ``304 Not
  Modified`` with the ``ETag`` and no body. The route still runs (the tag is a hash of what it
  answers, so nothing else can say whether it changed): a 304 saves the transfer and the
  client's decoding, not the master's work.
- Never touched: other methods, non-200 answers, streams (NDJSON follows and log streams carry no
  ``Content-Length``), other content types (downloads, CSV), the proxy and the web UI's files,
  and answers that already carry an ``ETag`` or ``Cache-Control``.

Clients that send no ``If-None-Match`` (the official ``det`` client) see the same answers as
before, plus the two headers.
"""

from __future__ import annotations

import hashlib

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stalwart.master.api.whole_body import whole_body_send

__all__ = ["ConditionalGetMiddleware", "etag_of", "matches"]

_JSON = b"application/json"


def etag_of(body: bytes) -> str:
    """The strong entity tag of a body: a quoted hash of its bytes."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def matches(if_none_match: str, etag: str) -> bool:
    """Whether an ``If-None-Match`` value names ``etag`` (RFC 9110's weak comparison, which
    ``If-None-Match`` uses: ``W/"x"`` matches ``"x"``)."""
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*":
            return True
        if candidate.removeprefix("W/") == etag:
            return True
    return False


class ConditionalGetMiddleware:
    """Adds ``ETag`` and ``Cache-Control`` to whole JSON answers of API GETs and answers a
    matching ``If-None-Match`` with ``304`` (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "GET"
            or not str(scope.get("path", "")).startswith("/api/")
        ):
            await self.app(scope, receive, send)
            return
        asked = b", ".join(v for k, v in scope["headers"] if k == b"if-none-match")

        async def finish(send: Send, start: Message, body: bytes) -> None:
            etag = etag_of(body)
            headers = [*start.get("headers", []), (b"etag", etag.encode())]
            headers.append((b"cache-control", b"no-cache"))
            if asked and matches(asked.decode("latin-1"), etag):
                kept = [(k, v) for k, v in headers if k.lower() not in _BODY_HEADERS]
                await send({"type": "http.response.start", "status": 304, "headers": kept})
                await send({"type": "http.response.body", "body": b""})
                return
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, whole_body_send(send, _eligible, finish))


_BODY_HEADERS = frozenset({b"content-length", b"content-type"})


def _eligible(start: Message) -> bool:
    """A whole 200 JSON answer without caching headers of its own."""
    if start.get("status") != 200:
        return False
    names = {k.lower(): v for k, v in start.get("headers", [])}
    content_type = names.get(b"content-type", b"").split(b";")[0].strip().lower()
    return (
        content_type == _JSON
        and b"content-length" in names
        and b"etag" not in names
        and b"cache-control" not in names
    )
