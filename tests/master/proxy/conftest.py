"""Real servers for the proxy's tests: no mocks, real sockets.

- ``upstream``: a task's services on loopback, on an event loop of their own in a thread: an
  ASGI app under uvicorn (mounted at ``/proxy/web``, as JupyterLab runs with its ``base_url``),
  a TCP echo server and a TCP server that greets and hangs up (sshd stand-ins), and a
  WebSocket server that drops the connection on the first message.
- ``proxy``: a FastAPI app with ``/proxy/{task_id}/{path:path}`` routes for HTTP and WebSocket
  calling the forwarding functions with fixed targets (``web``, ``vanish``, ``ssh``,
  ``greet``, and ``dead``/``deadssh`` on a port where nothing listens), under uvicorn on
  another loop and thread, with the master's error handlers and ``close_clients()`` in its
  lifespan.

Tests drive them with httpx, the ``websockets`` client and the official ``determined`` tunnel.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import queue
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
import uvicorn
from fastapi import FastAPI, Request, WebSocket
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route, WebSocketRoute
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as websockets_serve

from stalwart.master.api.errors import install_error_handlers
from stalwart.master.proxy import (
    ProxyTarget,
    close_clients,
    forward_http,
    forward_websocket,
    request_path,
    tunnel_tcp,
)
from tests.compat.conftest import det_venv as det_venv

WAIT_S = 15.0
BIG_BYTES = 20 * 1024 * 1024
BIG_CHUNK = 64 * 1024


def big_chunk(index: int) -> bytes:
    """The ``index``-th chunk of the large body (distinct bytes per chunk)."""
    return hashlib.sha256(str(index).encode()).digest() * (BIG_CHUNK // 32)


def big_digest() -> str:
    digest = hashlib.sha256()
    for index in range(BIG_BYTES // BIG_CHUNK):
        digest.update(big_chunk(index))
    return digest.hexdigest()


class LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)
        self.loop.close()


class _Server(uvicorn.Server):
    """uvicorn that says when it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@asynccontextmanager
async def serving(app: Any, *, lifespan: Literal["on", "off"] = "off") -> AsyncIterator[int]:
    """Serve ``app`` on a free loopback port (yielded) until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = _Server(
        uvicorn.Config(app, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=2)
    )
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        listening = asyncio.ensure_future(server.listening.wait())
        await asyncio.wait([task, listening], return_when=asyncio.FIRST_COMPLETED)
        if not listening.done():
            listening.cancel()
            task.result()
            raise RuntimeError("uvicorn did not start")
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task
        sock.close()


@dataclass
class Gate:
    """A held streaming response: ``release()`` (from any thread) lets it finish; ``closed``
    is set when its body generator ends, finished or cancelled."""

    loop: asyncio.AbstractEventLoop
    event: asyncio.Event = field(default_factory=asyncio.Event)
    released: bool = False
    closed: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released = True
        self.loop.call_soon_threadsafe(self.event.set)


@dataclass
class Upstream:
    """The task's services (see the module docstring)."""

    loop: asyncio.AbstractEventLoop | None = None
    port: int = 0
    echo_port: int = 0
    greet_port: int = 0
    vanish_port: int = 0
    gates: dict[str, Gate] = field(default_factory=dict)
    ws_closes: dict[str, queue.Queue[tuple[int, str]]] = field(default_factory=dict)
    tcp_closed: queue.Queue[bytes] = field(default_factory=queue.Queue)

    def gate(self, name: str) -> Gate:
        assert self.loop is not None
        gate = self.gates[name] = Gate(self.loop)
        return gate

    def ws_close_queue(self, name: str) -> queue.Queue[tuple[int, str]]:
        found = self.ws_closes[name] = queue.Queue()
        return found


def _upstream_app(upstream: Upstream) -> Starlette:
    async def echo(request: Request) -> Response:
        digest = hashlib.sha256()
        size = 0
        async for chunk in request.stream():
            digest.update(chunk)
            size += len(chunk)
        body = {
            "method": request.method,
            "raw_path": request.scope["raw_path"].decode("latin-1"),
            "query": request.scope["query_string"].decode("latin-1"),
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in request.headers.raw],
            "size": size,
            "sha256": digest.hexdigest(),
        }
        return JSONResponse(body)

    async def big(_request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            for index in range(BIG_BYTES // BIG_CHUNK):
                yield big_chunk(index)

        return StreamingResponse(chunks(), media_type="application/octet-stream")

    async def held(request: Request) -> Response:
        gate = upstream.gates[request.query_params["gate"]]

        async def events() -> AsyncIterator[bytes]:
            try:
                yield b"data: first\n\n"
                await gate.event.wait()
                yield b"data: last\n\n"
            finally:
                gate.closed.set()

        return StreamingResponse(events(), media_type="text/event-stream")

    async def redirect(_request: Request) -> Response:
        return Response(status_code=302, headers={"Location": "/proxy/web/lab/tree?x=1"})

    async def cookies(_request: Request) -> Response:
        response = Response(b"cookies", media_type="text/plain")
        response.raw_headers += [
            (b"set-cookie", b"a=1; Path=/"),
            (b"set-cookie", b"b=2; Path=/proxy/web/"),
            (b"set-cookie", b"auth=stolen; Path=/"),
            (b"x-kept", b"yes"),
            (b"x-private", b"hop"),
            (b"connection", b"X-Private"),
            (b"proxy-authenticate", b"Basic"),
        ]
        return response

    async def ws_echo(websocket: WebSocket) -> None:
        offered = websocket.scope.get("subprotocols", [])
        await websocket.accept(subprotocol="chat.v2" if "chat.v2" in offered else None)
        headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in websocket.headers.raw]
        path = websocket.scope["raw_path"].decode("latin-1")
        query = websocket.scope["query_string"].decode("latin-1")
        await websocket.send_text(json.dumps({"headers": headers, "path": path, "query": query}))
        name = websocket.query_params.get("name", "")
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                if name in upstream.ws_closes:
                    closed = (int(message.get("code", 1005)), str(message.get("reason", "")))
                    upstream.ws_closes[name].put(closed)
                return
            text = message.get("text")
            if text is not None and text.startswith("close:"):
                await websocket.close(int(text.split(":")[1]), "bye")
                return
            if text is not None:
                await websocket.send_text(text)
            else:
                await websocket.send_bytes(message["bytes"])

    async def ws_reject(websocket: WebSocket) -> None:
        await websocket.send_denial_response(Response(b"unknown kernel", status_code=404))

    routes = [
        Route("/echo/{rest:path}", echo, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/big", big),
        Route("/held", held),
        Route("/redirect", redirect),
        Route("/cookies", cookies),
        WebSocketRoute("/ws/echo", ws_echo),
        WebSocketRoute("/ws/reject", ws_reject),
    ]
    return Starlette(routes=[Mount("/proxy/web", routes=routes)])


async def _echo_connection(
    upstream: Upstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Echo until the peer closes; then report the connection's first bytes as closed."""
    first = b""
    while data := await reader.read(65536):
        first = first or data[:16]
        writer.write(data)
        await writer.drain()
    writer.close()
    await writer.wait_closed()
    upstream.tcp_closed.put(first)


async def _greet_connection(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"SSH-2.0-stand-in\r\n")
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def _vanish(connection: ServerConnection) -> None:
    """A WebSocket service that dies on its first message (no close frame)."""
    await connection.recv()
    assert connection.transport is not None
    connection.transport.abort()


def closed_port() -> int:
    """A loopback port where nothing listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def in_thread(name: str, serve: Callable[[threading.Event], Awaitable[None]]) -> Iterator[None]:
    """Run ``serve(ready)`` on a loop in a thread until the block ends; ``serve`` sets
    ``ready`` once it listens and must return once the loop's ``stop`` event is set."""
    thread = LoopThread(name)
    ready = threading.Event()
    stop = asyncio.Event()

    async def main() -> None:
        task = asyncio.ensure_future(serve(ready))
        try:
            await asyncio.wait(
                [task, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    running = asyncio.run_coroutine_threadsafe(main(), thread.loop)
    try:
        ready.wait(WAIT_S)
        if running.done() or not ready.is_set():
            running.result(0)
            raise RuntimeError(f"{name} did not start")
        yield
    finally:
        thread.loop.call_soon_threadsafe(stop.set)
        running.result(WAIT_S)
        thread.stop()


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    found = Upstream()

    async def serve(ready: threading.Event) -> None:
        found.loop = asyncio.get_running_loop()
        echo = await asyncio.start_server(
            lambda r, w: _echo_connection(found, r, w), "127.0.0.1", 0
        )
        greet = await asyncio.start_server(_greet_connection, "127.0.0.1", 0)
        vanish = await websockets_serve(_vanish, "127.0.0.1", 0)
        found.echo_port = echo.sockets[0].getsockname()[1]
        found.greet_port = greet.sockets[0].getsockname()[1]
        found.vanish_port = next(iter(vanish.sockets)).getsockname()[1]
        async with serving(_upstream_app(found)) as port, echo, greet, vanish:
            found.port = port
            ready.set()
            try:
                await asyncio.Event().wait()
            finally:
                for gate in found.gates.values():
                    gate.event.set()

    with in_thread("upstream", serve):
        yield found


@dataclass
class Proxy:
    port: int
    targets: dict[str, ProxyTarget]

    def url(self, path: str, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"


def proxy_app(targets: dict[str, ProxyTarget]) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await close_clients()

    app = FastAPI(lifespan=lifespan)
    install_error_handlers(app)

    @app.api_route(
        "/proxy/{task_id}/{path:path}",
        methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
    )
    async def http(request: Request, task_id: str, path: str) -> Response:
        return await forward_http(request, targets[task_id], request_path(request))

    @app.websocket("/proxy/{task_id}/{path:path}")
    async def websocket(websocket: WebSocket, task_id: str, path: str) -> None:
        target = targets[task_id]
        if target.tcp:
            await tunnel_tcp(websocket, target)
        else:
            await forward_websocket(websocket, target, request_path(websocket))

    return app


@pytest.fixture(scope="module")
def proxy(upstream: Upstream) -> Iterator[Proxy]:
    dead = closed_port()
    targets = {
        "web": ProxyTarget("127.0.0.1", upstream.port, tcp=False),
        "dead": ProxyTarget("127.0.0.1", dead, tcp=False),
        "vanish": ProxyTarget("127.0.0.1", upstream.vanish_port, tcp=False),
        "ssh": ProxyTarget("127.0.0.1", upstream.echo_port, tcp=True),
        "greet": ProxyTarget("127.0.0.1", upstream.greet_port, tcp=True),
        "deadssh": ProxyTarget("127.0.0.1", dead, tcp=True),
    }
    found = Proxy(0, targets)

    async def serve(ready: threading.Event) -> None:
        async with serving(proxy_app(targets), lifespan="on") as port:
            found.port = port
            ready.set()
            await asyncio.Event().wait()

    with in_thread("proxy", serve):
        yield found
