"""Which headers cross the proxy, in each direction (pure functions).

To the task's service (:func:`upstream_headers`):

- hop-by-hop headers are dropped (RFC 9110 section 7.6.1: ``Connection``, ``Keep-Alive``,
  ``Proxy-*``, ``TE``, ``Trailer``, ``Transfer-Encoding``, ``Upgrade``, and every header the
  ``Connection`` header names), and so is ``Expect`` (``100-continue`` is negotiated per hop);
- the user's master credentials never reach a task: ``Authorization`` is dropped unless it
  carries a task's own token (``Authorization: token T``, the scheme Jupyter reads; the proxy
  checked it is that notebook's), and the master's session cookie :data:`AUTH_COOKIE` is taken
  out of ``Cookie`` (the other cookies, such as Jupyter's ``_xsrf``, stay);
- ``Host`` is the service's ``host:port``; ``X-Forwarded-For`` gets the client's address
  appended; ``X-Forwarded-Proto`` (``http``/``https``) and ``X-Forwarded-Host`` (the ``Host``
  the client asked the master for) are set.

For a WebSocket the ``Sec-WebSocket-*`` headers are dropped too: each hop negotiates its own
key, version, extensions (compression), and the subprotocol is passed on separately.

Back to the client (:func:`downstream_headers`): hop-by-hop headers are dropped; ``Date`` and
``Server`` are the master's own (its server adds them); every other header is kept in order,
repeated ones (``Set-Cookie``) as repeated headers, except a ``Set-Cookie`` for
:data:`AUTH_COOKIE`, which would replace the user's master session.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "AUTH_COOKIE",
    "HOP_BY_HOP",
    "downstream_headers",
    "strip_auth_cookie",
    "strip_hop_by_hop",
    "upstream_headers",
]

AUTH_COOKIE = "auth"
"""The master's session cookie (set by ``POST /api/v1/auth/login``)."""

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"}
)
"""Hop-by-hop header names (lower case); every ``proxy-*`` header is one too."""

_NOT_UPSTREAM = frozenset({"host", "authorization", "expect"})
_NOT_DOWNSTREAM = frozenset({"date", "server"})
_FORWARDED = frozenset({"x-forwarded-proto", "x-forwarded-host"})

Header = tuple[str, str]


def _named_by_connection(headers: Iterable[Header]) -> set[str]:
    named: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            named.update(t.strip().lower() for t in value.split(",") if t.strip())
    return named


def strip_hop_by_hop(headers: Iterable[Header]) -> list[Header]:
    """``headers`` without hop-by-hop headers (including those ``Connection`` names)."""
    headers = list(headers)
    drop = HOP_BY_HOP | _named_by_connection(headers)
    return [
        (name, value)
        for name, value in headers
        if name.lower() not in drop and not name.lower().startswith("proxy-")
    ]


def strip_auth_cookie(value: str) -> str | None:
    """A ``Cookie`` header value without :data:`AUTH_COOKIE` (``None`` when nothing is left)."""
    kept = [
        part.strip()
        for part in value.split(";")
        if part.strip() and part.split("=", 1)[0].strip() != AUTH_COOKIE
    ]
    return "; ".join(kept) or None


def upstream_headers(
    headers: Iterable[Header],
    *,
    upstream_host: str,
    client_host: str | None,
    scheme: str,
    websocket: bool = False,
) -> list[Header]:
    """The headers to send to the task's service for a request carrying ``headers``.

    ``upstream_host`` is the service's ``host:port``; ``client_host`` the address the request
    came from (``None`` when unknown); ``scheme`` the request's (``http``, ``https``, ``ws`` or
    ``wss``). With ``websocket`` the result has no ``Host`` (the WebSocket client sets it) and
    no ``Sec-WebSocket-*``.
    """
    incoming = list(headers)
    original_host = next((v for n, v in incoming if n.lower() == "host"), None)
    result: list[Header] = []
    forwarded_for: list[str] = []
    for name, value in strip_hop_by_hop(incoming):
        lower = name.lower()
        if lower == "authorization" and value[:6].lower() == "token ":
            result.append((name, value))  # the task's own token (Jupyter's scheme)
            continue
        if lower in _NOT_UPSTREAM or lower in _FORWARDED:
            continue
        if websocket and (lower.startswith("sec-websocket-") or lower == "content-length"):
            continue
        if lower == "x-forwarded-for":
            forwarded_for.append(value)
            continue
        if lower == "cookie":
            cookie = strip_auth_cookie(value)
            if cookie is not None:
                result.append((name, cookie))
            continue
        result.append((name, value))
    if client_host:
        forwarded_for.append(client_host)
    if forwarded_for:
        result.append(("X-Forwarded-For", ", ".join(forwarded_for)))
    result.append(("X-Forwarded-Proto", "https" if scheme in ("https", "wss") else "http"))
    if original_host:
        result.append(("X-Forwarded-Host", original_host))
    if not websocket:
        result.insert(0, ("Host", upstream_host))
    return result


def _cookie_name(set_cookie: bytes) -> bytes:
    return set_cookie.split(b";", 1)[0].split(b"=", 1)[0].strip()


def downstream_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The service's response headers as the client gets them (ASGI form: lower-case names)."""
    lowered = [(name.lower(), value) for name, value in headers]
    as_text = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in lowered]
    drop = {n.encode("latin-1") for n in HOP_BY_HOP | _named_by_connection(as_text)}
    return [
        (name, value)
        for name, value in lowered
        if name not in drop
        and not name.startswith(b"proxy-")
        and name.decode("latin-1") not in _NOT_DOWNSTREAM
        and not (name == b"set-cookie" and _cookie_name(value) == AUTH_COOKIE.encode())
    ]
