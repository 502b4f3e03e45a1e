"""Browser-facing rules (issue 20): a write authenticated by the ``auth`` cookie alone must be
JSON from the master's own pages (no cross-site request forgery), and every answer carries the
security headers (a CSP the shipped UI lives with, no framing, no sniffing, no referrer leaks)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fastapi.testclient import TestClient

from stalwart.master.api.browser import CSP
from stalwart.master.services.passwords import client_hash
from stalwart.master.ui import STATIC_DIR

UI_SOURCE = Path(__file__).resolve().parents[2] / "ui" / "src"
"""The UI's TypeScript source (built into STATIC_DIR by `make ui`)."""

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
        (_bundle(), {}),
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


def _bundle() -> str:
    """The path of the UI's script bundle, as the built ``index.html`` names it."""
    found = re.search(r'src="(/ui/assets/[^"]+\.js)"', (STATIC_DIR / "index.html").read_text())
    assert found, "index.html names no bundle under /ui/assets/"
    return found.group(1)


def test_the_shipped_ui_fits_the_policy() -> None:
    """What the CSP forbids does not occur in the UI: inline scripts or styles, style
    attributes, code built from strings, and anything loaded from another origin; in the
    source (``ui/src``), no markup from strings either (React's text is escaped)."""
    html = (STATIC_DIR / "index.html").read_text()
    for banned in ("<style", " style=", "javascript:"):
        assert banned not in html
    for tag in html.split("<script")[1:]:
        assert ' src="/ui/' in tag.split(">", 1)[0], "an inline script"
    for tag in html.split("<link")[1:]:
        assert ' href="/ui/' in tag.split(">", 1)[0], "a stylesheet from elsewhere"
    for bundle in Path(STATIC_DIR).rglob("*.js"):
        text = bundle.read_text()
        for banned in ("eval(", "new Function", "cdn.", 'import("http'):
            assert banned not in text, (bundle.name, banned)
    for sheet in Path(STATIC_DIR).rglob("*.css"):
        text = sheet.read_text()
        assert "url(http" not in text, sheet.name
        assert "@import" not in text, sheet.name
    sources = [*UI_SOURCE.rglob("*.ts"), *UI_SOURCE.rglob("*.tsx")]
    assert len(sources) > 10, UI_SOURCE
    for source in sources:
        text = source.read_text()
        for banned in (
            "dangerouslySetInnerHTML",
            "innerHTML",
            "eval(",
            "new Function",
            'setAttribute("style"',
            "<style",
            "cdn.",
        ):
            assert banned not in text, (source.name, banned)
    assert "script-src 'self';" in CSP
    assert "style-src 'self';" in CSP
