"""Forwarding an HTTP request to a task's service: :func:`forward_http`.

Contract:

- Streaming both ways. The request body is read from ``request.stream()`` as the client sends
  it (never whole into memory); a request with neither ``Content-Length`` nor
  ``Transfer-Encoding`` is sent without a body. The response body goes back chunk by chunk as
  the service writes it, untouched (compressed bodies stay compressed, with their
  ``Content-Encoding`` and ``Content-Length``), so long-polls and server-sent events reach the
  client at once.
- Method, path (see :mod:`~stalwart.master.proxy.target`), query string and status pass
  unchanged; redirects are not followed (``Location`` passes through as the service wrote it).
- Headers are filtered as :mod:`~stalwart.master.proxy.headers` says: no hop-by-hop headers,
  no ``Authorization``, no master ``auth`` cookie upstream; several ``Set-Cookie`` come back as
  several headers.
- A service that cannot be reached (connection refused or timed out after
  :data:`~stalwart.master.proxy.target.CONNECT_TIMEOUT_S`) raises
  :class:`~stalwart.errors.UnavailableError` (503) before anything is sent to the client; so
  does one that drops the connection before answering. There is no read or write timeout.
  A service that fails while its body streams cuts the client's response (the error is
  raised into the server, which aborts the connection: a truncated body is never passed off
  as complete).
- The upstream response is closed when the body ends, when the client goes away (the server's
  disconnect is noticed even while the service is silent) or on any error.

Connections: by default one shared :class:`httpx.AsyncClient` per event loop
(:func:`shared_client`), with keep-alive to the services, no limit on concurrent connections
(each long-poll holds one), no proxy from the environment and no cookie jar. The app's
lifespan calls :func:`close_clients` on shutdown. A caller may pass its own ``client`` instead;
it must not follow redirects, and its default headers are not used (the request is built
without them).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from stalwart.errors import UnavailableError
from stalwart.master.proxy.headers import downstream_headers, upstream_headers
from stalwart.master.proxy.target import CONNECT_TIMEOUT_S, ProxyTarget, not_answering

__all__ = ["close_clients", "forward_http", "shared_client"]

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def _new_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=None, write=None, pool=None),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
        follow_redirects=False,
        trust_env=False,
        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
    )


def shared_client() -> httpx.AsyncClient:
    """The running event loop's proxy client (created on first use).

    One per loop because an httpx client's connections belong to the loop that opened them
    (tests and tools may run several loops in one process).
    """
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        client = _clients[loop] = _new_client()
    return client


async def close_clients() -> None:
    """Close the running loop's shared client (call from the app's lifespan on shutdown);
    forget those of loops that are closed. Safe to call when none was made."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    for loop in [loop for loop in _clients if loop.is_closed()]:
        _clients.pop(loop, None)
    if client is not None:
        await client.aclose()


class _UpstreamResponse(StreamingResponse):
    """Streams an upstream response's raw body, and closes it whatever happens."""

    def __init__(self, upstream: httpx.Response) -> None:
        super().__init__(upstream.aiter_raw(), status_code=upstream.status_code)
        self.raw_headers = downstream_headers(upstream.headers.raw)
        self._upstream = upstream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._upstream.aclose()


async def _body(request: Request) -> AsyncIterator[bytes]:
    async for chunk in request.stream():
        if chunk:
            yield chunk


async def forward_http(
    request: Request,
    target: ProxyTarget,
    path: str,
    *,
    client: httpx.AsyncClient | None = None,
) -> Response:
    """Forward ``request`` to ``target`` at ``path`` and answer the service's response,
    streamed (see the module docstring for the contract).

    Raises :class:`~stalwart.errors.UnavailableError` when the service cannot be reached or
    drops the connection before answering.
    """
    client = client if client is not None else shared_client()
    headers = upstream_headers(
        request.headers.items(),
        upstream_host=target.netloc,
        client_host=request.client.host if request.client else None,
        scheme=request.url.scheme,
    )
    has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
    upstream_request = httpx.Request(
        request.method,
        target.url("http", path, request.scope.get("query_string", b"")),
        headers=headers,
        content=_body(request) if has_body else None,
    )
    try:
        upstream = await client.send(upstream_request, stream=True, follow_redirects=False)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise not_answering(target) from exc
    except httpx.TransportError as exc:
        raise UnavailableError(
            f"the task's service at {target.netloc} dropped the connection before answering "
            f"({type(exc).__name__}: {exc or 'no detail'}); try again in a moment"
        ) from exc
    try:
        return _UpstreamResponse(upstream)
    except BaseException:
        await upstream.aclose()
        raise
