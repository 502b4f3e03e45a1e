"""``forward_http`` against a real upstream through a real master-side server."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.master.proxy.conftest import (
    BIG_BYTES,
    BIG_CHUNK,
    WAIT_S,
    Proxy,
    Upstream,
    big_chunk,
    big_digest,
)


def _headers(seen: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, value in seen["headers"]:
        found.setdefault(name.lower(), []).append(value)
    return found


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
def test_method_path_query_and_body_reach_the_service(
    proxy: Proxy, upstream: Upstream, method: str
) -> None:
    body = b"" if method in ("GET", "DELETE") else b'{"cell": "print(1)"}'
    response = httpx.request(
        method,
        proxy.url("/proxy/web/echo/notebooks/a%2Fb%20c.ipynb?x=1&y=%2F&x=2"),
        content=body or None,
        headers={"Accept-Encoding": "identity"},
    )
    assert response.status_code == 200, response.text
    seen = response.json()
    assert seen["method"] == method
    assert seen["raw_path"] == "/proxy/web/echo/notebooks/a%2Fb%20c.ipynb"
    assert seen["query"] == "x=1&y=%2F&x=2"
    assert seen["size"] == len(body)
    assert seen["sha256"] == hashlib.sha256(body).hexdigest()
    headers = _headers(seen)
    assert headers["host"] == [f"127.0.0.1:{upstream.port}"]
    assert headers["x-forwarded-for"] == ["127.0.0.1"]
    assert headers["x-forwarded-proto"] == ["http"]
    assert headers["x-forwarded-host"] == [f"127.0.0.1:{proxy.port}"]
    assert headers["accept-encoding"] == ["identity"]
    if not body:
        assert "transfer-encoding" not in headers
        assert "content-length" not in headers


def test_master_credentials_stay_with_the_master(proxy: Proxy) -> None:
    response = httpx.get(
        proxy.url("/proxy/web/echo/api/contents"),
        headers={
            "Authorization": "Bearer master-token",
            "Cookie": "auth=master-token; _xsrf=2|jupyter; username-127-0-0-1=u",
            "X-XSRFToken": "2|jupyter",
            "Connection": "keep-alive, X-Hop",
            "X-Hop": "secret",
            "Proxy-Authorization": "Basic eA==",
        },
    )
    headers = _headers(response.json())
    assert "authorization" not in headers
    assert "proxy-authorization" not in headers
    assert "x-hop" not in headers
    assert headers["cookie"] == ["_xsrf=2|jupyter; username-127-0-0-1=u"]
    assert headers["x-xsrftoken"] == ["2|jupyter"]


def test_large_bodies_stream_both_ways(proxy: Proxy) -> None:
    async def main() -> None:
        async def upload() -> AsyncIterator[bytes]:
            for index in range(BIG_BYTES // BIG_CHUNK):
                yield big_chunk(index)

        async with httpx.AsyncClient(timeout=WAIT_S) as client:
            sent = await client.post(proxy.url("/proxy/web/echo/upload"), content=upload())
            seen = sent.json()
            assert (seen["size"], seen["sha256"]) == (BIG_BYTES, big_digest())
            assert "chunked" in _headers(seen)["transfer-encoding"]

            digest = hashlib.sha256()
            chunks = 0
            async with client.stream("GET", proxy.url("/proxy/web/big")) as response:
                assert response.status_code == 200
                async for chunk in response.aiter_raw():
                    digest.update(chunk)
                    chunks += 1
            assert digest.hexdigest() == big_digest()
            assert chunks > 1

    asyncio.run(main())


def test_a_declared_length_upload_keeps_its_length(proxy: Proxy) -> None:
    body = b"x" * 300_000
    seen = httpx.put(proxy.url("/proxy/web/echo/file"), content=body).json()
    assert _headers(seen)["content-length"] == [str(len(body))]
    assert "transfer-encoding" not in _headers(seen)
    assert seen["sha256"] == hashlib.sha256(body).hexdigest()


def test_events_reach_the_client_before_the_stream_ends(proxy: Proxy, upstream: Upstream) -> None:
    gate = upstream.gate("events")

    async def main() -> None:
        async with (
            httpx.AsyncClient(timeout=WAIT_S) as client,
            client.stream("GET", proxy.url("/proxy/web/held?gate=events")) as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            chunks = response.aiter_raw()
            first = await anext(chunks)
            assert first == b"data: first\n\n"
            assert not gate.released  # the upstream is still holding the stream open
            gate.release()
            rest = b"".join([chunk async for chunk in chunks])
            assert rest == b"data: last\n\n"

    asyncio.run(main())
    assert gate.closed.wait(WAIT_S)


def test_a_client_that_goes_away_closes_the_upstream_response(
    proxy: Proxy, upstream: Upstream
) -> None:
    gate = upstream.gate("abandoned")

    async def main() -> None:
        async with (
            httpx.AsyncClient(timeout=WAIT_S) as client,
            client.stream("GET", proxy.url("/proxy/web/held?gate=abandoned")) as response,
        ):
            assert await anext(response.aiter_raw()) == b"data: first\n\n"
        # leaving the block closes the half-read response's connection

    asyncio.run(main())
    assert gate.closed.wait(WAIT_S), "the upstream stream was not closed"
    assert not gate.released


def test_redirects_pass_through_unfollowed(proxy: Proxy) -> None:
    response = httpx.get(proxy.url("/proxy/web/redirect"), follow_redirects=False)
    assert response.status_code == 302
    assert response.headers["location"] == "/proxy/web/lab/tree?x=1"


def test_response_headers_keep_each_cookie_and_drop_hop_by_hop(proxy: Proxy) -> None:
    response = httpx.get(proxy.url("/proxy/web/cookies"))
    assert response.status_code == 200
    assert response.headers.get_list("set-cookie") == ["a=1; Path=/", "b=2; Path=/proxy/web/"]
    assert response.headers["x-kept"] == "yes"
    assert "x-private" not in response.headers
    assert "proxy-authenticate" not in response.headers
    assert response.headers.get_list("server") == ["uvicorn"]
    assert len(response.headers.get_list("date")) == 1
    assert response.text == "cookies"


def test_a_service_that_does_not_answer_is_503(proxy: Proxy) -> None:
    dead = proxy.targets["dead"]
    response = httpx.post(proxy.url("/proxy/dead/api/kernels"), content=b"{}")
    assert response.status_code == 503
    body = response.json()
    assert body["error"]["reason"] == "Unavailable"
    assert body["message"] == (
        f"the task's service at 127.0.0.1:{dead.port} does not answer: it may still be "
        "starting; try again in a moment"
    )


def test_head_and_not_found_pass_through(proxy: Proxy) -> None:
    assert httpx.head(proxy.url("/proxy/web/cookies")).status_code == 200
    missing = httpx.get(proxy.url("/proxy/web/nothing/here"))
    assert missing.status_code == 404
    assert missing.text == "Not Found"
    assert json.loads(httpx.get(proxy.url("/proxy/web/echo/")).text)["method"] == "GET"
