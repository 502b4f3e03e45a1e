"""What the master does for browsers: security headers on every answer, and the rule that
keeps other sites from writing with a user's ``auth`` cookie (cross-site request forgery).

- :class:`SecurityHeadersMiddleware` adds ``Content-Security-Policy`` (:data:`CSP`: only the
  master's own scripts, styles and API; no framing), ``X-Frame-Options: DENY``,
  ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin`` to every response.
  The API docs pages (``/docs``, ``/redoc``) load FastAPI's Swagger/ReDoc assets from a CDN
  with an inline script, so they get the other headers but not the CSP; neither do the
  interactive tasks' pages under ``/proxy/`` (JupyterLab and TensorBoard set their own).
- :func:`check_cookie_write`: a write (any method but GET, HEAD, OPTIONS) authenticated by the
  cookie alone must be JSON (the ``Content-Type`` as sent, before
  :class:`~stalwart.master.api.middleware.WireMiddleware` relabels it) and come from the
  master's own page (``Origin``, else ``Referer``, naming the request's ``Host``). A form or a
  ``text/plain`` fetch from another site can send neither. Requests with the
  ``Authorization`` header (the CLIs, the SDKs, the web UI) are not concerned.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stalwart.errors import ForbiddenError

__all__ = [
    "CSP",
    "ORIGINAL_CONTENT_TYPE",
    "SECURITY_HEADERS",
    "SecurityHeadersMiddleware",
    "check_cookie_write",
]

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""The web UI's policy: its ES modules, stylesheet and API calls are all the master's own."""

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
_CSP_HEADER = (b"content-security-policy", CSP.encode())
_NO_CSP_PATHS = ("/docs", "/redoc", "/proxy/")

ORIGINAL_CONTENT_TYPE = "stalwart.original_content_type"
"""Scope key: the ``Content-Type`` the client sent (WireMiddleware relabels API bodies)."""

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class SecurityHeadersMiddleware:
    """Adds the security headers to every HTTP response (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        extra = list(SECURITY_HEADERS)
        if not path.startswith(_NO_CSP_PATHS):
            extra.append(_CSP_HEADER)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                added = [(k, v) for k, v in extra if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        await self.app(scope, receive, with_headers)


def _is_json(content_type: str | None) -> bool:
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    return mime == "application/json" or (
        mime.startswith("application/") and mime.endswith("+json")
    )


def _same_host(url: str | None, host: str | None) -> bool:
    if not url or not host or url == "null":
        return False
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return False
    return bool(netloc) and netloc.lower() == host.strip().lower()


def check_cookie_write(scope: Scope) -> None:
    """Refuse (403) a cookie-authenticated write that a foreign page could have sent."""
    if scope.get("method", "GET") in _SAFE_METHODS:
        return
    headers = Headers(scope=scope)
    sent_type = scope.get(ORIGINAL_CONTENT_TYPE, headers.get("content-type"))
    origin = headers.get("origin")
    source = origin if origin is not None else headers.get("referer")
    if _is_json(sent_type) and _same_host(source, headers.get("host")):
        return
    raise ForbiddenError(
        "a write authenticated only by the `auth` cookie must be a JSON request "
        "(Content-Type: application/json) from the master's own pages (an Origin or Referer "
        "naming this master); send the token in the Authorization header instead "
        "(`Authorization: Bearer <token>`)"
    )
