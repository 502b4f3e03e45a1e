"""ASGI middleware: gzip for whole answers of the API and the web UI's files.

Contract:

- Only requests whose ``Accept-Encoding`` accepts ``gzip`` (not ``gzip;q=0``), that are not
  ``HEAD`` and carry no ``Range``, under ``/api/``, ``/ui/`` or ``/`` itself (the page). The
  proxy to interactive tasks (``/proxy/``) and everything else pass untouched.
- Only whole answers: a ``Content-Length`` of at least :data:`MIN_BYTES` and at most
  :data:`MAX_BYTES`, a compressible type (JSON, text, JavaScript, CSS, SVG) and no
  ``Content-Encoding`` yet. Streams (NDJSON follows, log streams: no ``Content-Length``),
  downloads (``application/gzip``, Arrow, octet streams), partial answers and ``304`` pass
  untouched, byte for byte as they were written.
- A compressed answer gets ``Content-Encoding: gzip``, its new ``Content-Length`` and ``Vary:
  Accept-Encoding``; an ``ETag`` becomes weak (``W/"..."``), which
  :mod:`stalwart.master.api.conditional`'s ``If-None-Match`` comparison matches either way; a
  ``304`` to a request that named the weak tag carries the weak tag too (it stands for the
  compressed copy the client holds).
  Every answer of a path that may be compressed carries ``Vary: Accept-Encoding``.
- It runs outside the conditional-GET middleware (tags are hashes of the uncompressed bodies)
  and the wire middleware (which reads error bodies), so nothing inside sees gzip bytes.

Level :data:`LEVEL` of zlib: about 10 ms for a megabyte of JSON, 5-10x smaller; the UI's bundle
shrinks about 3x and is cached by browsers for a year.
"""

from __future__ import annotations

import gzip

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stalwart.master.api.whole_body import whole_body_send

__all__ = ["LEVEL", "MAX_BYTES", "MIN_BYTES", "CompressionMiddleware", "accepts_gzip"]

LEVEL = 5
MIN_BYTES = 1024
"""Smaller answers are sent as they are (the headers would eat most of the saving)."""
MAX_BYTES = 32 * 1024 * 1024
"""Bigger answers are sent as they are rather than held whole in memory to compress."""

_TYPES = (
    b"application/json",
    b"application/javascript",
    b"text/",
    b"image/svg+xml",
)
_VARY = (b"vary", b"Accept-Encoding")


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` value accepts gzip (``gzip``, ``x-gzip`` or ``*``, with
    a quality above zero)."""
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "x-gzip", "*"):
            continue
        quality = params.strip().lower()
        if quality.startswith("q="):
            try:
                return float(quality[2:]) > 0
            except ValueError:
                return False
        return True
    return False


def _covered(scope: Scope) -> bool:
    path = str(scope.get("path", ""))
    return path == "/" or path.startswith(("/api/", "/ui/"))


class CompressionMiddleware:
    """gzip for whole, compressible answers (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _covered(scope):
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = dict(scope["headers"])
        wanted = (
            scope.get("method") != "HEAD"
            and b"range" not in headers
            and accepts_gzip(headers.get(b"accept-encoding", b"").decode("latin-1"))
        )
        if not wanted:
            await self.app(scope, receive, _vary_send(send, b""))
            return
        asked = headers.get(b"if-none-match", b"")
        outer = _vary_send(send, asked)
        await self.app(scope, receive, whole_body_send(outer, _compressible, _finish))


def _vary_send(send: Send, asked: bytes) -> Send:
    """``send`` with ``Vary: Accept-Encoding`` on every answer it starts, and a 304's tag
    weak when the client asked with the weak tag of a compressed copy (``asked``: the
    request's ``If-None-Match``), so the 304 names the copy the client holds."""

    async def vary_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = _with_vary(message)
            if message.get("status") == 304 and asked:
                message = _weak_tag_if_asked(message, asked)
        await send(message)

    return vary_send


def _weak_tag_if_asked(start: Message, asked: bytes) -> Message:
    headers = []
    for name, value in start.get("headers", []):
        if name.lower() == b"etag" and not value.startswith(b"W/") and b"W/" + value in asked:
            value = b"W/" + value
        headers.append((name, value))
    return {**start, "headers": headers}


async def _finish(send: Send, start: Message, body: bytes) -> None:
    packed = gzip.compress(body, compresslevel=LEVEL, mtime=0)
    await send(_compressed_start(start, len(packed)))
    await send({"type": "http.response.body", "body": packed})


def _compressible(start: Message) -> bool:
    names: dict[bytes, bytes] = {k.lower(): v for k, v in start.get("headers", [])}
    if b"content-encoding" in names or start.get("status") in (204, 206, 304):
        return False
    length = names.get(b"content-length", b"")
    if not length.isdigit() or not MIN_BYTES <= int(length) <= MAX_BYTES:
        return False
    content_type = names.get(b"content-type", b"").split(b";")[0].strip().lower()
    return content_type.startswith(_TYPES)


def _with_vary(start: Message) -> Message:
    return {**start, "headers": _vary(list(start.get("headers", [])))}


def _vary(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` whose ``Vary`` names Accept-Encoding (added to one already there)."""
    for i, (name, value) in enumerate(headers):
        if name.lower() == b"vary":
            if b"accept-encoding" not in value.lower() and value.strip() != b"*":
                headers[i] = (name, value + b", Accept-Encoding")
            return headers
    return [*headers, _VARY]


def _compressed_start(start: Message, length: int) -> Message:
    headers = []
    for name, value in start.get("headers", []):
        lowered = name.lower()
        if lowered == b"content-length":
            continue
        if lowered == b"etag" and not value.startswith(b"W/"):
            value = b"W/" + value
        headers.append((name, value))
    headers += [(b"content-encoding", b"gzip"), (b"content-length", str(length).encode())]
    return {**start, "headers": headers}
