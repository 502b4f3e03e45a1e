"""Browser-facing rules (issue 20): a write authenticated by the ``auth`` cookie alone must be
JSON from the master's own pages (no cross-site request forgery), and every answer carries the
security headers (a CSP the shipped UI lives with, no framing, no sniffing, no referrer leaks)."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from stalwart.master.api.browser import CSP
from stalwart.master.services.passwords import client_hash
from stalwart.master.ui import STATIC_DIR

HOST = "testserver"  # the Host the test client sends


def _cookie(client: TestClient) -> str:
    resp = client.post(
        "/api/v1/auth/login",
        json={"username": "admin", "password": client_hash(""), "isHashed": True},
    )
    assert resp.status_code == 200, resp.text
    token: str = resp.cookies["auth"]
    client.cookies.clear()
    return token


def _new_user(name: str) -> bytes:
    user = {"user": {"username": name, "admin": True, "active": True}, "password": "pw12345678"}
    return json.dumps(user).encode()


def _users(client: TestClient, headers: dict[str, str]) -> set[str]:
    resp = client.get("/api/v1/users", headers=headers)
    assert resp.status_code == 200, resp.text
    return {u["username"] for u in resp.json()["users"]}


def test_a_foreign_page_cannot_write_with_the_cookie(
    client: TestClient, admin: dict[str, str]
) -> None:
    cookie = {"Cookie": f"auth={_cookie(client)}"}
    attempts = [
        {"Content-Type": "text/plain", "Origin": "https://evil.example"},
        {"Content-Type": "text/plain", "Origin": f"http://{HOST}"},  # a simple request
        {"Content-Type": "application/x-www-form-urlencoded", "Origin": f"http://{HOST}"},
        {"Content-Type": "application/json", "Origin": "https://evil.example"},
        {"Content-Type": "application/json", "Origin": "null"},
        {"Content-Type": "application/json", "Referer": "https://evil.example/page"},
        {"Content-Type": "application/json"},  # neither Origin nor Referer
        {},
    ]
    for n, headers in enumerate(attempts):
        resp = client.post("/api/v1/users", content=_new_user(f"csrf{n}"), headers=cookie | headers)
        assert resp.status_code == 403, (headers, resp.text)
        assert "Authorization header" in resp.json()["message"]
    assert not {f"csrf{n}" for n in range(len(attempts))} & _users(client, admin)


def test_the_masters_own_pages_and_the_header_still_write(
    client: TestClient, admin: dict[str, str]
) -> None:
    cookie = {"Cookie": f"auth={_cookie(client)}"}
    own = [
        {"Content-Type": "application/json", "Origin": f"http://{HOST}"},
        {"Content-Type": "application/json; charset=utf-8", "Referer": f"http://{HOST}/#/x"},
    ]
    for n, headers in enumerate(own):
        resp = client.post("/api/v1/users", content=_new_user(f"own{n}"), headers=cookie | headers)
        assert resp.status_code == 200, (headers, resp.text)
    # The official client posts JSON with no Content-Type and no Origin, with the header.
    resp = client.post("/api/v1/users", content=_new_user("det"), headers=admin)
    assert resp.status_code == 200, resp.text
    foreign = {"Content-Type": "text/plain", "Origin": "https://evil.example"}
    resp = client.post("/api/v1/users", content=_new_user("hdr"), headers=admin | foreign)
    assert resp.status_code == 200, resp.text
    # Reading with the cookie alone still works.
    assert client.get("/api/v1/users", headers=cookie).status_code == 200


def test_every_answer_carries_the_security_headers(
    client: TestClient, admin: dict[str, str]
) -> None:
    for path, headers in (
        ("/", {}),
        ("/ui/app.js", {}),
        ("/info", {}),
        ("/api/v1/me", admin),
        ("/api/v1/experiments", {}),  # a 401
    ):
        resp = client.get(path, headers=headers)
        assert resp.headers["x-frame-options"] == "DENY", path
        assert resp.headers["x-content-type-options"] == "nosniff", path
        assert resp.headers["referrer-policy"] == "same-origin", path
        assert resp.headers["content-security-policy"] == CSP, path
    docs = client.get("/docs")  # Swagger UI loads its assets from a CDN: no CSP there
    assert docs.status_code == 200
    assert docs.headers["x-frame-options"] == "DENY"
    assert "content-security-policy" not in docs.headers


def test_the_shipped_ui_fits_the_policy() -> None:
    """What the CSP forbids does not occur in the UI: inline scripts or styles, style
    attributes, eval, and anything loaded from another origin."""
    html = (STATIC_DIR / "index.html").read_text()
    for banned in ("<style", " style=", "javascript:"):
        assert banned not in html
    for tag in html.split("<script")[1:]:
        assert ' src="/' in tag.split(">", 1)[0], "an inline script"
    for source in Path(STATIC_DIR).rglob("*.js"):
        text = source.read_text()
        for banned in ("eval(", "new Function", 'setAttribute("style"', "innerHTML", "cdn."):
            assert banned not in text, (source.name, banned)
        assert "style:" not in text, (source.name, "a style attribute passed to h()")
    assert "url(http" not in (STATIC_DIR / "style.css").read_text()
    assert "script-src 'self';" in CSP
    assert "style-src 'self';" in CSP
