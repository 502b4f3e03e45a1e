"""The stop gate (``master/stopping.py``) on a real ASGI stack: new requests during a stop and
requests in flight past the grace are answered 503 with ``Retry-After`` in the master's error
shape; requests that finish within the grace are answered as usual. (The whole stop, signal to
exit, is held by ``tests/reliability/test_clean_stop.py``.)"""

from __future__ import annotations

import asyncio
import time

import httpx
from starlette.types import Receive, Scope, Send

from stalwart.master.stopping import StopGate, StopMiddleware


def test_a_stop_answers_new_and_overdue_requests_503() -> None:
    async def main() -> None:
        gate = StopGate(grace_s=0.3)
        gate.bind(asyncio.get_running_loop())
        never = asyncio.Event()

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["path"] == "/slow":
                await never.wait()
            elif scope["path"] == "/short":
                await asyncio.sleep(0.1)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        transport = httpx.ASGITransport(app=StopMiddleware(app, gate=gate))
        async with httpx.AsyncClient(transport=transport, base_url="http://master") as http:
            assert (await http.get("/api/v1/me")).status_code == 200
            slow = asyncio.ensure_future(http.get("/slow"))
            short = asyncio.ensure_future(http.get("/short"))
            await asyncio.sleep(0.05)
            began = time.monotonic()
            gate.begin()
            new = await http.get("/api/v1/me")
            assert new.status_code == 503
            assert new.headers["retry-after"] == "1"
            body = new.json()
            assert body["message"] == "the master is stopping; retry shortly"
            assert body["error"]["reason"] == "Unavailable"
            assert body["error"]["code"] == 14
            assert (await short).status_code == 200  # finished within the grace
            overdue = await slow
            assert overdue.status_code == 503
            assert 0.25 <= time.monotonic() - began < 2.0

    asyncio.run(main())
