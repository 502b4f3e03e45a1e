"""How the master is served (issue 20): proxy headers are believed only from the configured
proxies (so ``X-Forwarded-For`` cannot dodge the login lockout), and TLS when configured. The
server is uvicorn with the options ``stalwart master`` passes it
(:mod:`stalwart.master.serve`)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from stalwart.master.app import create_app
from stalwart.master.serve import master_url, uvicorn_options
from stalwart.master.services.passwords import client_hash
from stalwart.master.settings import MasterSettings
from tests.security.conftest import make_settings
from tests.tls import self_signed


@contextmanager
def served(settings: MasterSettings) -> Iterator[str]:
    """The master under uvicorn with ``stalwart master``'s options; its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(settings, run_cluster=False),
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=3,
        **uvicorn_options(settings),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive(), "uvicorn did not start"
        assert time.monotonic() < deadline, "uvicorn did not start in time"
        time.sleep(0.02)
    scheme = "https" if settings.http.tls_cert else "http"
    try:
        yield f"{scheme}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _failed_logins(url: str, tries: int) -> list[int]:
    """Wrong-password logins of admin, each claiming another client address."""
    codes = []
    with httpx.Client(base_url=url, timeout=20) as http:
        for n in range(tries):
            resp = http.post(
                "/api/v1/auth/login",
                json={"username": "admin", "password": client_hash("wrong"), "isHashed": True},
                headers={"X-Forwarded-For": f"203.0.113.{n + 1}"},
            )
            codes.append(resp.status_code)
    return codes


def test_forwarded_for_does_not_dodge_the_login_lockout(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", security={"login_max_failures": 3})
    assert uvicorn_options(settings)["proxy_headers"] is False
    with served(settings) as url:
        codes = _failed_logins(url, 5)
    assert codes[:3] == [401, 401, 401], codes
    assert codes[3:] == [429, 429], codes


def test_a_configured_proxy_is_believed(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path / "home",
        security={"login_max_failures": 3},
        http={"trusted_proxies": ["127.0.0.1"]},
    )
    with served(settings) as url:
        codes = _failed_logins(url, 5)
    assert 429 not in codes, codes  # each claimed address is counted on its own


def _self_signed(where: Path) -> tuple[Path, Path]:
    cert_pem, key_pem = self_signed()
    cert_file, key_file = where / "master.crt", where / "master.key"
    cert_file.write_bytes(cert_pem)
    key_file.write_bytes(key_pem)
    return cert_file, key_file


def test_the_master_serves_tls_when_configured(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    settings = make_settings(tmp_path / "home", http={"tls_cert": cert, "tls_key": key})
    assert master_url(settings).startswith("https://")
    with served(settings) as url:
        resp = httpx.get(f"{url}/info", verify=False, timeout=20)
        assert resp.status_code == 200, resp.text
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not served
            httpx.get(url.replace("https://", "http://") + "/info", timeout=5)


@pytest.mark.parametrize("half", [{"tls_cert": "c.pem"}, {"tls_key": "k.pem"}])
def test_tls_needs_both_files(tmp_path: Path, half: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="both tls_cert and tls_key"):
        make_settings(tmp_path / "home", http=half)
