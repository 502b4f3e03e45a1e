"""The master's web UI: static pages (HTML, ES modules, CSS) shipped as package data.

``mount_ui(app)`` serves ``index.html`` at ``/`` and the assets under ``/ui/``; the pages talk to
the REST API under ``/api/v1`` with the token of ``POST /api/v1/auth/login`` (kept in the tab's
``sessionStorage``). The UI-only endpoints (``/api/v1/ui/...``) live in :mod:`.router`,
:mod:`.cause` (why a run failed) and :mod:`.logs_download` (logs as a text file).
No build step, no npm, no CDN: the files in ``static/`` are what the browser runs.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from stalwart.master.ui import cause, logs_download
from stalwart.master.ui import router as ui_router

__all__ = ["STATIC_DIR", "mount_ui"]

STATIC_DIR = Path(str(files("stalwart.master.ui") / "static"))
"""Where the UI's files are (inside the installed package)."""

_NO_CACHE = {"Cache-Control": "no-cache"}


def mount_ui(app: FastAPI, *, api_prefix: str = "/api/v1") -> None:
    """Serve the UI at ``/`` (``/ui/`` for its assets) and add its endpoints under
    ``api_prefix``."""
    app.include_router(ui_router.router, prefix=api_prefix)
    app.include_router(cause.router, prefix=api_prefix)
    app.include_router(logs_download.router, prefix=api_prefix)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        """The single page; it routes by the URL's fragment (``#/experiments/3``)."""
        return FileResponse(STATIC_DIR / "index.html", headers=_NO_CACHE)

    @app.get("/ui", include_in_schema=False)
    def ui_root() -> RedirectResponse:
        return RedirectResponse("/")

    app.mount("/ui", StaticFiles(directory=STATIC_DIR), name="ui")
