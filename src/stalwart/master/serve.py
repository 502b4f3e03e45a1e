"""Serving the master: uvicorn with a clean stop (``stalwart master``, and so ``stalwart up``).

:func:`serve` runs ``create_app(settings)`` under :class:`MasterServer`, whose signal handler
(SIGTERM, SIGINT) begins the app's :class:`~stalwart.master.stopping.StopGate` at once, before
uvicorn starts closing connections: long-polls and follows end, new requests get 503 with
``Retry-After``, requests in flight get :data:`~stalwart.master.stopping.GRACE_S`. uvicorn's
``timeout_graceful_shutdown`` (:data:`~stalwart.master.stopping.SERVER_GRACE_S`) is only a
backstop; the lifespan then stops the cluster loop and the resource manager. The process exits
within :data:`~stalwart.master.stopping.STOP_BUDGET_S` of the signal.

How the settings become uvicorn's options (:func:`uvicorn_options`):

- Proxy headers: uvicorn believes ``X-Forwarded-For`` / ``X-Forwarded-Proto`` from loopback by
  default, which would let any local client (or a proxy passing the header through) pick the
  address the login lockout counts. They are believed only from ``http.trusted_proxies``, and
  not at all when it is empty (the default).
- TLS: ``http.tls_cert`` and ``http.tls_key`` make uvicorn serve HTTPS.
"""

from __future__ import annotations

import gc
import mimetypes
import socket
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from stalwart.master.app import create_app
from stalwart.master.settings import MasterSettings
from stalwart.master.stopping import SERVER_GRACE_S, StopGate

__all__ = ["MasterServer", "master_url", "serve", "uvicorn_options", "warm_routes"]


class MasterServer(uvicorn.Server):
    """uvicorn's server, beginning the app's stop as soon as a signal arrives."""

    def __init__(self, config: uvicorn.Config, gate: StopGate) -> None:
        super().__init__(config)
        self.gate = gate

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.gate.begin()  # signal-safe: a flag, and a call scheduled on the event loop
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start serving, then move what is alive (modules, routes, models, the master's state:
        it lives as long as the process) out of the collector's reach: each full collection
        walked those 200,000 objects, adding up to 150 ms to whichever request triggered it."""
        await super().startup(sockets)
        gc.collect()
        gc.freeze()


def uvicorn_options(settings: MasterSettings) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config`` (besides the app): proxy headers and TLS."""
    http = settings.http
    options: dict[str, Any] = {
        "proxy_headers": bool(http.trusted_proxies),
        "forwarded_allow_ips": ",".join(http.trusted_proxies) or "",
    }
    if http.tls_cert is not None and http.tls_key is not None:
        options["ssl_certfile"] = str(http.tls_cert)
        options["ssl_keyfile"] = str(http.tls_key)
    return options


def master_url(settings: MasterSettings) -> str:
    """The URL the master serves at (``https://`` with TLS)."""
    scheme = "https" if settings.http.tls_cert is not None else "http"
    return f"{scheme}://{settings.host}:{settings.port}"


def serve(settings: MasterSettings, *, app: FastAPI | None = None) -> None:
    """Serve the master for ``settings`` until SIGTERM or SIGINT (see the module docstring);
    from ``settings.workers`` processes when it is more than 1
    (:mod:`stalwart.master.supervisor`)."""
    if settings.workers > 1 and app is None:
        from stalwart.master.supervisor import serve_workers

        serve_workers(settings)
        return
    app = create_app(settings) if app is None else app
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        timeout_graceful_shutdown=int(SERVER_GRACE_S),
        **uvicorn_options(settings),
    )
    warm_routes(app)
    MasterServer(config, app.state.stop_gate).run()


_NOWHERE: dict[str, Any] = {
    "type": "http",
    "path": "/.stalwart-warm-up",
    "method": "GET",
    "root_path": "",
    "headers": [],
    "query_string": b"",
}
"""A request no route serves: matching it tries every route."""


def warm_routes(app: FastAPI) -> None:
    """Match a request no route serves against every route before serving: FastAPI (0.165 and
    later) prepares an included router's routes (their dependencies, read from signatures) on
    the first request that reaches them, and the web UI's page, the last route, waited about a
    second on a fresh master for all 270 of them. Python's MIME types table (read on the first
    file served) is loaded here too."""
    for route in app.router.routes:
        route.matches(_NOWHERE)
    mimetypes.init()
