"""What crosses the proxy: the pure header rules and the upstream URL."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from stalwart.master.proxy import ProxyTarget, request_path
from stalwart.master.proxy.headers import (
    downstream_headers,
    strip_auth_cookie,
    strip_hop_by_hop,
    upstream_headers,
)


def test_hop_by_hop_headers_and_those_connection_names_are_dropped() -> None:
    headers = [
        ("Connection", "keep-alive, X-Hop"),
        ("Keep-Alive", "timeout=5"),
        ("Proxy-Authorization", "Basic eA=="),
        ("Proxy-Connection", "keep-alive"),
        ("TE", "trailers"),
        ("Trailer", "X-Sum"),
        ("Transfer-Encoding", "chunked"),
        ("Upgrade", "h2c"),
        ("X-Hop", "1"),
        ("Accept", "text/html"),
        ("X-Other", "kept"),
    ]
    assert strip_hop_by_hop(headers) == [("Accept", "text/html"), ("X-Other", "kept")]


@pytest.mark.parametrize(
    ("cookie", "kept"),
    [
        ("auth=token", None),
        ("auth=token; _xsrf=2|abc", "_xsrf=2|abc"),
        ("a=1;auth=token;  b=2", "a=1; b=2"),
        ("authx=1; xauth=2; _xsrf=3", "authx=1; xauth=2; _xsrf=3"),
        ("auth = token; c=3", "c=3"),
        ("", None),
    ],
)
def test_the_masters_auth_cookie_is_taken_out(cookie: str, kept: str | None) -> None:
    assert strip_auth_cookie(cookie) == kept


def test_upstream_headers_hide_credentials_and_say_where_the_request_came_from() -> None:
    sent = [
        ("Host", "master.example:8080"),
        ("Authorization", "Bearer master-token"),
        ("Cookie", "auth=master-token; _xsrf=x1"),
        ("X-Forwarded-For", "10.0.0.1"),
        ("X-Forwarded-Proto", "ftp"),
        ("X-Forwarded-Host", "spoofed"),
        ("Expect", "100-continue"),
        ("Content-Length", "3"),
    ]
    assert upstream_headers(
        sent, upstream_host="10.1.2.3:8888", client_host="192.0.2.7", scheme="https"
    ) == [
        ("Host", "10.1.2.3:8888"),
        ("Cookie", "_xsrf=x1"),
        ("Content-Length", "3"),
        ("X-Forwarded-For", "10.0.0.1, 192.0.2.7"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "master.example:8080"),
    ]


def test_a_notebooks_own_token_reaches_it() -> None:
    sent = [("Authorization", "token notebook-token")]
    assert upstream_headers(sent, upstream_host="h:1", client_host=None, scheme="http") == [
        ("Host", "h:1"),
        ("Authorization", "token notebook-token"),
        ("X-Forwarded-Proto", "http"),
    ]


def test_websocket_upstream_headers_leave_the_handshake_to_each_hop() -> None:
    sent = [
        ("Host", "master.example"),
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Key", "abc"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Protocol", "v1.kernel.websocket.jupyter.org"),
        ("Sec-WebSocket-Extensions", "permessage-deflate"),
        ("Origin", "https://master.example"),
        ("Cookie", "auth=t"),
        ("Authorization", "Bearer t"),
    ]
    assert upstream_headers(
        sent, upstream_host="h:1", client_host=None, scheme="wss", websocket=True
    ) == [
        ("Origin", "https://master.example"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "master.example"),
    ]


def test_downstream_headers_keep_repeated_cookies_but_not_an_auth_cookie() -> None:
    answered = [
        (b"Content-Type", b"text/html"),
        (b"Set-Cookie", b"a=1; Path=/"),
        (b"Set-Cookie", b"auth=evil; Path=/"),
        (b"Set-Cookie", b"b=2"),
        (b"Connection", b"close, X-Secret"),
        (b"X-Secret", b"1"),
        (b"Transfer-Encoding", b"chunked"),
        (b"Date", b"Mon, 01 Jan 2024 00:00:00 GMT"),
        (b"Server", b"TornadoServer/6.4"),
        (b"Content-Encoding", b"gzip"),
    ]
    assert downstream_headers(answered) == [
        (b"content-type", b"text/html"),
        (b"set-cookie", b"a=1; Path=/"),
        (b"set-cookie", b"b=2"),
        (b"content-encoding", b"gzip"),
    ]


def test_upstream_urls_keep_escapes_and_bracket_ipv6() -> None:
    target = ProxyTarget("10.0.0.5", 8888)
    assert target.url("http", "/proxy/t/api/contents/a%2Fb c", b"x=1&y=%2F") == (
        "http://10.0.0.5:8888/proxy/t/api/contents/a%2Fb%20c?x=1&y=%2F"
    )
    assert target.url("ws", "lab", "") == "ws://10.0.0.5:8888/lab"
    assert ProxyTarget("::1", 22, tcp=True).netloc == "[::1]:22"
    assert target.tcp is False


def test_request_path_is_the_path_as_sent() -> None:
    scope = {"type": "http", "path": "/proxy/t/a/b c", "raw_path": b"/proxy/t/a%2Fb%20c"}
    assert request_path(Request(scope)) == "/proxy/t/a%2Fb%20c"
    assert request_path(Request({"type": "http", "path": "/p/a b"})) == "/p/a%20b"
