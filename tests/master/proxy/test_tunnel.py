"""``tunnel_tcp``: raw TCP through a WebSocket, with the official ``det shell`` tunnel and with
the ``websockets`` client."""

from __future__ import annotations

import asyncio
import json
import os
import random
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedOK, InvalidStatus

from tests.master.proxy.conftest import WAIT_S, Proxy, Upstream


@pytest.mark.compat
def test_the_official_tunnel_carries_bytes_both_ways(
    proxy: Proxy, upstream: Upstream, det_venv: Path, tmp_path: Path
) -> None:
    """``python -m determined.cli.tunnel MASTER SERVICE`` is ``det shell``'s ssh ProxyCommand:
    its stdin goes to the service, the service's bytes come out of its stdout."""
    data = random.Random(7).randbytes(512 * 1024)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DET_", "STALWART_"))}
    env["HOME"] = str(tmp_path)
    env.pop("XDG_CONFIG_HOME", None)

    async def main() -> None:
        tunnel = await asyncio.create_subprocess_exec(
            str(det_venv / "bin" / "python"),
            "-m",
            "determined.cli.tunnel",
            proxy.url(""),
            "ssh",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        assert tunnel.stdin is not None
        assert tunnel.stdout is not None
        assert tunnel.stderr is not None
        stdin = tunnel.stdin

        async def send() -> None:
            stdin.write(data)
            await stdin.drain()

        try:
            async with asyncio.timeout(WAIT_S):
                sending = asyncio.ensure_future(send())
                echoed = await tunnel.stdout.readexactly(len(data))
                await sending
                stdin.close()  # ends the tunnel, as ssh does when the session ends
                rc = await tunnel.wait()
        finally:
            if tunnel.returncode is None:
                tunnel.kill()
                await tunnel.wait()
        assert echoed == data
        assert rc == 0, (await tunnel.stderr.read()).decode()

    asyncio.run(main())
    assert upstream.tcp_closed.get(timeout=WAIT_S) == data[:16]


def test_frames_reach_the_socket_and_its_bytes_come_back(proxy: Proxy, upstream: Upstream) -> None:
    async def main() -> None:
        async with connect(proxy.url("/proxy/ssh/", scheme="ws"), open_timeout=WAIT_S) as ws:
            await ws.send(b"tunnel-check\x00\x01")
            assert await ws.recv() == b"tunnel-check\x00\x01"
            await ws.send("text becomes bytes")
            assert await ws.recv() == b"text becomes bytes"

    asyncio.run(main())
    assert upstream.tcp_closed.get(timeout=WAIT_S) == b"tunnel-check\x00\x01"


def test_the_service_hanging_up_closes_the_websocket_with_1000(proxy: Proxy) -> None:
    async def main() -> None:
        async with connect(proxy.url("/proxy/greet/", scheme="ws"), open_timeout=WAIT_S) as ws:
            assert await ws.recv() == b"SSH-2.0-stand-in\r\n"
            with pytest.raises(ConnectionClosedOK):
                await ws.recv()
            assert ws.close_code == 1000

    asyncio.run(main())


def test_a_tcp_service_that_does_not_answer_refuses_with_503(proxy: Proxy) -> None:
    dead = proxy.targets["deadssh"]

    async def main() -> None:
        with pytest.raises(InvalidStatus) as refused:
            await connect(proxy.url("/proxy/deadssh/", scheme="ws"))
        response = refused.value.response
        assert response.status_code == 503
        assert json.loads(response.body)["message"] == (
            f"the task's service at 127.0.0.1:{dead.port} does not answer: it may still be "
            "starting; try again in a moment"
        )

    asyncio.run(main())
