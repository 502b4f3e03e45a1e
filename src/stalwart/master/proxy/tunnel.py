"""A raw TCP service (sshd) through a WebSocket: :func:`tunnel_tcp`.

This is what the official client's ``python -m determined.cli.tunnel MASTER SERVICE_ID``
(the ``ProxyCommand`` of ``det shell``) and Stalwart's own shell command speak: a WebSocket to
``/proxy/{task_id}/`` whose binary frames carry the TCP stream's bytes, each way.

Contract:

- The TCP connection to the service is opened **before** the WebSocket is accepted; a service
  that cannot be reached (refused, unroutable, or no answer within
  :data:`~stalwart.master.proxy.target.CONNECT_TIMEOUT_S`) is refused with 503 and the master's
  JSON error (:func:`~stalwart.master.proxy.websocket.refuse`), which the official client
  prints. No subprotocol is chosen.
- Client frames are written to the socket as they come, binary as is (text frames as their
  UTF-8 bytes); socket bytes go back as binary frames as they are read. Writes wait for the
  socket to drain, so a slow side slows the other instead of filling memory.
- When the client closes (or vanishes) the socket is closed; when the service closes the
  socket the WebSocket is closed with 1000, or 1011 if the connection failed. Nothing has a
  time limit once connected: an idle shell stays open.
"""

from __future__ import annotations

import asyncio
import contextlib

from starlette.websockets import WebSocket, WebSocketDisconnect

from stalwart.master.proxy.target import CONNECT_TIMEOUT_S, ProxyTarget, not_answering
from stalwart.master.proxy.websocket import close_reason, is_open, refuse, run_until_first

__all__ = ["READ_CHUNK_BYTES", "tunnel_tcp"]

READ_CHUNK_BYTES = 64 * 1024
"""The most bytes one binary frame from the service carries."""


async def tunnel_tcp(websocket: WebSocket, target: ProxyTarget) -> None:
    """Tunnel the client's WebSocket (not yet accepted) to ``target``'s TCP port until either
    side closes (see the module docstring). Refusals are answered here; nothing is raised."""
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(target.host, target.port)
    except (OSError, TimeoutError):
        await refuse(websocket, not_answering(target))
        return
    failure: list[str] = []
    try:
        try:
            await websocket.accept()
        except (WebSocketDisconnect, OSError):
            return  # the client left while the service was being reached

        async def client_to_socket() -> None:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("bytes")
                if data is None:
                    data = (message.get("text") or "").encode()
                writer.write(data)
                try:
                    await writer.drain()
                except OSError as exc:
                    failure.append(f"the connection to the task's service failed: {exc}")
                    return

        async def socket_to_client() -> None:
            while True:
                try:
                    data = await reader.read(READ_CHUNK_BYTES)
                except OSError as exc:
                    failure.append(f"the connection to the task's service failed: {exc}")
                    return
                if not data:
                    return
                try:
                    await websocket.send_bytes(data)
                except WebSocketDisconnect:
                    return

        await run_until_first(client_to_socket(), socket_to_client())
        if is_open(websocket):
            code, reason = (1011, close_reason(failure[0])) if failure else (1000, "")
            with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                await websocket.close(code, reason)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
