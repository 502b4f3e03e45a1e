"""ASGI middleware for the wire dialect's transport rules.

- The official client posts JSON without a ``Content-Type`` (``requests`` with ``data=str``), and
  tools such as curl label it form data: every ``/api/`` request body is read as JSON.
- A request whose declared ``Content-Length`` is over ``limits.max_request_bytes`` is answered
  413 at once, before its body is read.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["WireMiddleware"]

_JSON = b"application/json"


class WireMiddleware:
    """Normalizes request content types and enforces the request size limit."""

    def __init__(self, app: ASGIApp, *, max_request_bytes: int) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/api/"):
            await self.app(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
        length = next((v for k, v in headers if k == b"content-length"), None)
        if length is not None and length.isdigit() and int(length) > self.max_request_bytes:
            await self._too_large(send, int(length))
            return
        if scope.get("method") in ("POST", "PUT", "PATCH", "DELETE"):
            headers.append((b"content-type", _JSON))
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)

    async def _too_large(self, send: Send, length: int) -> None:
        message = (
            f"request body of {length} bytes is over the master's limit of "
            f"{self.max_request_bytes} bytes (limits.max_request_bytes)"
        )
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
