"""``forward_websocket`` between the ``websockets`` client and a real upstream WebSocket."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidStatus
from websockets.typing import Origin, Subprotocol

from tests.master.proxy.conftest import WAIT_S, Proxy, Upstream


def test_frames_subprotocol_and_headers_cross_both_ways(proxy: Proxy, upstream: Upstream) -> None:
    async def main() -> None:
        async with connect(
            proxy.url("/proxy/web/ws/echo?session_id=s%201", scheme="ws"),
            subprotocols=[Subprotocol("v1.other"), Subprotocol("chat.v2")],
            additional_headers={
                "Cookie": "auth=master-token; _xsrf=2|jupyter",
                "Authorization": "Bearer master-token",
            },
            origin=Origin("http://master.example"),
            open_timeout=WAIT_S,
            max_size=None,
        ) as ws:
            assert ws.subprotocol == "chat.v2"
            seen = json.loads(await ws.recv())
            headers = {name.lower(): value for name, value in seen["headers"]}
            assert seen["path"] == "/proxy/web/ws/echo"
            assert seen["query"] == "session_id=s%201"
            assert headers["cookie"] == "_xsrf=2|jupyter"
            assert headers["origin"] == "http://master.example"
            assert headers["host"] == f"127.0.0.1:{upstream.port}"
            assert headers["sec-websocket-protocol"] == "v1.other, chat.v2"
            assert headers["x-forwarded-for"] == "127.0.0.1"
            assert "authorization" not in headers

            await ws.send("héllo")
            assert await ws.recv() == "héllo"
            await ws.send(b"\x00\x01\xff")
            assert await ws.recv() == b"\x00\x01\xff"
            large = bytes(range(256)) * 8192  # 2 MiB, over the websockets client's default limit
            await ws.send(large)
            assert await ws.recv(decode=False) == large

            await ws.send("close:4001")
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 4001
            assert ws.close_reason == "bye"

    asyncio.run(main())


def test_the_clients_close_code_reaches_the_service(proxy: Proxy, upstream: Upstream) -> None:
    closes = upstream.ws_close_queue("c1")

    async def main() -> None:
        async with connect(
            proxy.url("/proxy/web/ws/echo?name=c1", scheme="ws"), open_timeout=WAIT_S
        ) as ws:
            assert ws.subprotocol is None
            await ws.recv()
            await ws.close(4002, "tab closed")

    asyncio.run(main())
    assert closes.get(timeout=WAIT_S) == (4002, "tab closed")


def test_a_service_that_does_not_answer_refuses_with_503(proxy: Proxy) -> None:
    dead = proxy.targets["dead"]

    async def main() -> None:
        with pytest.raises(InvalidStatus) as refused:
            await connect(proxy.url("/proxy/dead/api/kernels/k/channels", scheme="ws"))
        response = refused.value.response
        assert response.status_code == 503
        body = json.loads(response.body)
        assert body["error"]["reason"] == "Unavailable"
        assert f"127.0.0.1:{dead.port} does not answer" in body["message"]

    asyncio.run(main())


def test_a_service_refusing_the_handshake_is_passed_on(proxy: Proxy) -> None:
    async def main() -> None:
        with pytest.raises(InvalidStatus) as refused:
            await connect(proxy.url("/proxy/web/ws/reject", scheme="ws"))
        assert refused.value.response.status_code == 404
        assert refused.value.response.body == b"unknown kernel"

    asyncio.run(main())


def test_an_http_only_path_is_refused_with_the_services_answer(proxy: Proxy) -> None:
    async def main() -> None:
        with pytest.raises(InvalidStatus) as refused:
            await connect(proxy.url("/proxy/web/no-such-socket", scheme="ws"))
        assert refused.value.response.status_code == 403  # what Starlette answers

    asyncio.run(main())


def test_a_service_that_vanishes_closes_the_client_with_1011(proxy: Proxy) -> None:
    async def main() -> None:
        async with connect(proxy.url("/proxy/vanish/", scheme="ws"), open_timeout=WAIT_S) as ws:
            await ws.send("boom")
            with pytest.raises(ConnectionClosedError):
                await ws.recv()
            assert ws.close_code == 1011
            assert ws.close_reason == "the task's service went away"

    asyncio.run(main())


def test_a_client_that_vanishes_closes_the_service_with_1001(
    proxy: Proxy, upstream: Upstream
) -> None:
    closes = upstream.ws_close_queue("gone")

    async def main() -> None:
        ws = await connect(proxy.url("/proxy/web/ws/echo?name=gone", scheme="ws"))
        await ws.recv()
        assert ws.transport is not None
        ws.transport.abort()
        await ws.wait_closed()

    asyncio.run(main())
    assert closes.get(timeout=WAIT_S) == (1001, "")
