"""Serving the master: uvicorn with a clean stop (``stalwart master``, and so ``stalwart up``).

:func:`serve` runs ``create_app(settings)`` under :class:`MasterServer`, whose signal handler
(SIGTERM, SIGINT) begins the app's :class:`~stalwart.master.stopping.StopGate` at once, before
uvicorn starts closing connections: long-polls and follows end, new requests get 503 with
``Retry-After``, requests in flight get :data:`~stalwart.master.stopping.GRACE_S`. uvicorn's
``timeout_graceful_shutdown`` (:data:`~stalwart.master.stopping.SERVER_GRACE_S`) is only a
backstop; the lifespan then stops the cluster loop and the resource manager. The process exits
within :data:`~stalwart.master.stopping.STOP_BUDGET_S` of the signal.
"""

from __future__ import annotations

from types import FrameType

import uvicorn
from fastapi import FastAPI

from stalwart.master.app import create_app
from stalwart.master.settings import MasterSettings
from stalwart.master.stopping import SERVER_GRACE_S, StopGate

__all__ = ["MasterServer", "serve"]


class MasterServer(uvicorn.Server):
    """uvicorn's server, beginning the app's stop as soon as a signal arrives."""

    def __init__(self, config: uvicorn.Config, gate: StopGate) -> None:
        super().__init__(config)
        self.gate = gate

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.gate.begin()  # signal-safe: a flag, and a call scheduled on the event loop
        super().handle_exit(sig, frame)


def serve(settings: MasterSettings, *, app: FastAPI | None = None) -> None:
    """Serve the master for ``settings`` until SIGTERM or SIGINT (see the module docstring)."""
    app = create_app(settings) if app is None else app
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        timeout_graceful_shutdown=int(SERVER_GRACE_S),
    )
    MasterServer(config, app.state.stop_gate).run()
