"""The master's web UI: the built single-page app (``static/``) shipped as package data.

The UI's source is TypeScript and React under ``ui/`` at the repository root; ``make ui`` builds
it with Vite into ``static/`` (``index.html`` and hashed bundles under ``static/assets/``), and
the build is committed, so installing the package needs no Node.js. ``mount_ui(app)`` serves
``index.html`` at ``/`` (never cached: it names the current bundles) and the files under
``/ui/`` (``/ui/assets/*`` cached for a year: their names change with their content). The pages
talk to the REST API under ``/api/v1`` with the token of ``POST /api/v1/auth/login`` (kept in the
tab's ``sessionStorage``). The UI-only endpoints (``/api/v1/ui/...``) live in :mod:`.router`,
:mod:`.cause` (why a run failed) and :mod:`.logs_download` (logs as a text file).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

from stalwart.master.ui import cause, logs_download
from stalwart.master.ui import router as ui_router

__all__ = ["ASSET_CACHE", "STATIC_DIR", "mount_ui"]

STATIC_DIR = Path(str(files("stalwart.master.ui") / "static"))
"""Where the built UI is (inside the installed package)."""

_NO_CACHE = {"Cache-Control": "no-cache"}
ASSET_CACHE = "public, max-age=31536000, immutable"
"""``Cache-Control`` of the hashed bundles under ``/ui/assets/``."""


class _HashedAssets(StaticFiles):
    """Static files whose names carry their content's hash: browsers may keep them for good."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        if response.status_code == 200:
            response.headers["Cache-Control"] = ASSET_CACHE
        return response


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

    app.mount("/ui/assets", _HashedAssets(directory=STATIC_DIR / "assets"), name="ui-assets")
    app.mount("/ui", StaticFiles(directory=STATIC_DIR), name="ui")
