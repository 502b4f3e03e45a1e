"""Forwarding a WebSocket to a task's service: :func:`forward_websocket` (Jupyter kernels,
terminals, TensorBoard's live updates).

Contract:

- The service is connected to **before** the client's WebSocket is accepted, at
  ``ws://host:port/path?query`` (path as in :mod:`~stalwart.master.proxy.target`), offering
  the subprotocols the client asked for; the client is accepted with the one the service chose.
- Headers go up as :mod:`~stalwart.master.proxy.headers` says (``Cookie`` without the master's
  ``auth`` cookie, ``Origin``, ``User-Agent``... pass; ``Authorization``, hop-by-hop and
  ``Sec-WebSocket-*`` do not). Jupyter checks ``Origin`` against ``Host`` (the service's
  ``host:port``), so the task must allow the master's origin (``ServerApp.allow_origin``).
- Refusals happen before the handshake completes, as an HTTP answer to the upgrade request
  (:func:`refuse`): a service that cannot be reached is **503** with the master's JSON error
  body (the same message as for HTTP); a service that refuses the handshake passes its own
  status and body on (Jupyter's 403 for a foreign origin, 404 for an unknown kernel). A server
  without the ASGI WebSocket denial-response extension (uvicorn has it) instead accepts and
  closes with **1011** and the message as the reason.
- Text frames stay text, binary stay binary, both ways, until one side closes; the other side
  is then closed with the same code and reason. Codes a close frame cannot carry become: from
  the service, 1000 for "no code" and 1011 when it vanished; from the client, 1001 ("going
  away") for both (uvicorn reports a lost client connection as 1005, "no code").
  Messages up to :data:`MAX_MESSAGE_BYTES` are passed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable

from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.typing import Subprotocol

from stalwart.errors import StalwartError, UnavailableError
from stalwart.master.api.errors import error_response, status_of
from stalwart.master.proxy.headers import upstream_headers
from stalwart.master.proxy.target import CONNECT_TIMEOUT_S, ProxyTarget, not_answering

__all__ = [
    "MAX_MESSAGE_BYTES",
    "close_reason",
    "forward_websocket",
    "is_open",
    "refuse",
    "run_until_first",
]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest message passed from a service to a client (a notebook cell's output can be a
large image)."""

_SENDABLE = frozenset({1000, 1001, 1002, 1003, *range(1007, 1015)})
"""Close codes a close frame may carry below 3000 (RFC 6455 section 7.4)."""

_DENIAL = "websocket.http.response"


def close_reason(text: str) -> str:
    """``text`` cut to what a close frame holds (123 bytes of UTF-8)."""
    data = text.encode()
    if len(data) <= 123:
        return text
    return data[:120].decode(errors="ignore") + "..."


def _sendable(code: int | None, *, no_code: int, vanished: int) -> int:
    """``code`` if a close frame may carry it; else ``no_code`` for 1005 (closed without a
    code) and ``vanished`` for the rest (1006: the connection was lost)."""
    if code is not None and (code in _SENDABLE or 3000 <= code <= 4999):
        return code
    return no_code if code == 1005 else vanished


def is_open(websocket: WebSocket) -> bool:
    """Whether an accepted WebSocket may still be closed by us (neither side closed it)."""
    return (
        websocket.application_state == WebSocketState.CONNECTED
        and websocket.client_state == WebSocketState.CONNECTED
    )


async def refuse(websocket: WebSocket, error: StalwartError | Response) -> None:
    """Refuse a WebSocket not yet accepted: answer the upgrade request with ``error`` (a
    :class:`StalwartError` in the master's JSON shape, or a ready response), or, where the
    server cannot answer HTTP to an upgrade, accept and close with 1011."""
    if isinstance(error, StalwartError):
        http, grpc, reason = status_of(error)
        response: Response = error_response(http, grpc, reason, str(error))
        message = str(error)
    else:
        response = error
        message = f"the task's service answered {error.status_code}"
    if _DENIAL in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(response)
        return
    await websocket.accept()
    await websocket.close(1011, close_reason(message))


async def run_until_first(*pumps: Awaitable[None]) -> None:
    """Run ``pumps`` together until the first ends; cancel and await the others (also when
    this call is itself cancelled). The first pump's exception, if any, is raised."""
    tasks = [asyncio.ensure_future(pump) for pump in pumps]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    for task in done:
        task.result()


async def _open(websocket: WebSocket, target: ProxyTarget, path: str) -> ClientConnection | None:
    """The connection to the service, or ``None`` after refusing the client."""
    requested = [Subprotocol(p) for p in websocket.scope.get("subprotocols", [])]
    headers = upstream_headers(
        websocket.headers.items(),
        upstream_host=target.netloc,
        client_host=websocket.client.host if websocket.client else None,
        scheme=websocket.url.scheme,
        websocket=True,
    )
    try:
        return await connect(
            target.url("ws", path, websocket.scope.get("query_string", b"")),
            subprotocols=requested or None,
            additional_headers=headers,
            user_agent_header=None,
            proxy=None,
            open_timeout=CONNECT_TIMEOUT_S,
            max_size=MAX_MESSAGE_BYTES,
        )
    except InvalidStatus as exc:
        answer = exc.response
        media = answer.headers.get("Content-Type")
        await refuse(websocket, Response(bytes(answer.body), answer.status_code, media_type=media))
    except (OSError, TimeoutError):
        await refuse(websocket, not_answering(target))
    except WebSocketException as exc:
        await refuse(
            websocket,
            UnavailableError(
                f"the task's service at {target.netloc} did not complete the WebSocket "
                f"handshake ({exc}); try again in a moment"
            ),
        )
    return None


async def forward_websocket(websocket: WebSocket, target: ProxyTarget, path: str) -> None:
    """Bridge the client's WebSocket (not yet accepted) to the service's at ``path``, until
    either side closes (see the module docstring for the contract). Returns when both are
    closed; refusals are answered here, nothing is raised for them."""
    upstream = await _open(websocket, target, path)
    if upstream is None:
        return
    async with upstream:
        try:
            await websocket.accept(subprotocol=upstream.subprotocol)
        except (WebSocketDisconnect, OSError):
            return  # the client left while the service was being reached
        client_closed: list[tuple[int, str]] = []

        async def client_to_upstream() -> None:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    client_closed.append((message.get("code", 1005), message.get("reason") or ""))
                    return
                text = message.get("text")
                try:
                    await upstream.send(text if text is not None else message.get("bytes") or b"")
                except ConnectionClosed:
                    return

        async def upstream_to_client() -> None:
            try:
                async for data in upstream:
                    if isinstance(data, str):
                        await websocket.send_text(data)
                    else:
                        await websocket.send_bytes(data)
            except ConnectionClosed:
                pass
            except WebSocketDisconnect as exc:
                client_closed.append((exc.code, exc.reason or ""))

        await run_until_first(client_to_upstream(), upstream_to_client())
        if client_closed:
            code, reason = client_closed[0]
            await upstream.close(_sendable(code, no_code=1001, vanished=1001), close_reason(reason))
            return
        await upstream.close()
        code = _sendable(upstream.close_code, no_code=1000, vanished=1011)
        reason = upstream.close_reason or ("" if code != 1011 else "the task's service went away")
        if is_open(websocket):
            with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                await websocket.close(code, close_reason(reason))
