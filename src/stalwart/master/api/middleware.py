"""ASGI middleware for the wire dialect's transport rules.

- The official client posts JSON without a ``Content-Type`` (``requests`` with ``data=str``), and
  tools such as curl label it form data: every ``/api/`` request body (and the legacy
  ``POST /task-logs``'s) is read as JSON.
- A request whose declared ``Content-Length`` is over ``limits.max_request_bytes`` is answered
  413 at once, before its body is read. A body without a declared length (chunked) is counted
  as it is read: passing the limit raises :class:`BodyTooLargeError`, an ``HTTPException(413)``
  that FastAPI's body parsing re-raises and the error handlers answer in the wire shape (this
  middleware answers it itself if nothing else did).
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stalwart.master.api.browser import ORIGINAL_CONTENT_TYPE

__all__ = ["BodyTooLargeError", "WireMiddleware"]

_JSON = b"application/json"


def _too_large_message(length: int | None, limit: int) -> str:
    size = f"of {length} bytes" if length is not None else "over the limit"
    return (
        f"request body {size} is over the master's limit of {limit} bytes "
        "(limits.max_request_bytes)"
    )


class BodyTooLargeError(HTTPException):
    """A streamed request body went past ``limits.max_request_bytes`` (413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large_message(None, limit))


class WireMiddleware:
    """Normalizes request content types and enforces the request size limit."""

    def __init__(self, app: ASGIApp, *, max_request_bytes: int) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not (path.startswith("/api/") or path == "/task-logs"):
            await self.app(scope, receive, send)
            return
        sent_type = next((v for k, v in scope["headers"] if k == b"content-type"), None)
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
        length = next((v for k, v in headers if k == b"content-length"), None)
        if length is not None and length.isdigit() and int(length) > self.max_request_bytes:
            await self._too_large(send, int(length))
            return
        if scope.get("method") in ("POST", "PUT", "PATCH", "DELETE"):
            headers.append((b"content-type", _JSON))
            scope = {
                **scope,
                "headers": headers,
                ORIGINAL_CONTENT_TYPE: sent_type.decode("latin-1") if sent_type else None,
            }
        limit = self.max_request_bytes
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLargeError(limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLargeError:
            if started:
                raise
            await self._too_large(send, None)

    async def _too_large(self, send: Send, length: int | None) -> None:
        message = _too_large_message(length, self.max_request_bytes)
        body = json.dumps(
            {
                "message": message,
                "error": {"code": 8, "reason": "ResourceExhausted", "error": message},
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", _JSON), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
