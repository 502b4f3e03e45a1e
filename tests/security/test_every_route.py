"""Every route of the master needs a valid token, except the few that must not.

The test walks the application's route table, so a route added later is covered without
touching this file; the public ones are :data:`stalwart.master.policy.PUBLIC_ROUTES` plus the
static UI files and FastAPI's API description.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from sqlalchemy import update

from stalwart.master import policy
from stalwart.master.app import create_app
from stalwart.master.db.tables import UserSession
from tests.security.conftest import login, make_settings, state_of

API_DESCRIPTION = frozenset({"openapi", "swagger_ui_html", "swagger_ui_redirect", "redoc_html"})
"""FastAPI's own routes: the OpenAPI description and its viewers (no data)."""


def _endpoint(route: object) -> str | None:
    endpoint = getattr(route, "endpoint", None)
    if endpoint is None:
        return None
    return f"{endpoint.__module__}.{endpoint.__name__}"


def _all_routes(app: FastAPI) -> Iterator[tuple[str, str, str | None, str | None]]:
    """``(method, concrete path, endpoint, route name)`` of every HTTP route."""
    for ctx in iter_route_contexts(app.routes):
        methods = ctx.methods or set()
        path = ctx.path or ""
        concrete = re.sub(r"\{[^}]*\}", "1", path)
        for method in sorted(methods - {"HEAD"}):
            yield method, concrete, _endpoint(ctx), ctx.name


def _guarded(app: FastAPI) -> list[tuple[str, str]]:
    return [
        (method, path)
        for method, path, endpoint, name in _all_routes(app)
        if endpoint not in policy.PUBLIC_ROUTES and name not in API_DESCRIPTION
    ]


_APP = create_app(make_settings(Path("/nonexistent")), run_cluster=False)
GUARDED = _guarded(_APP)
"""The routes that need a token (read from the table; no app is started to list them)."""


def test_the_walk_sees_the_whole_api() -> None:
    paths = {path for _, path in GUARDED}
    assert len(GUARDED) > 80
    for expected in (
        "/api/v1/me",
        "/api/v1/users",
        "/api/v1/experiments/1/kill",
        "/api/v1/trials/1/metrics",
        "/api/v1/allocations/1/all_gather",
        "/api/v1/workspaces/1/roles",
        "/api/v1/master/config",
        "/api/v1/agents/tokens",
        "/api/v1/agents/1/token",
    ):
        assert expected in paths


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = make_settings(tmp_path_factory.mktemp("every-route") / "home")
    with TestClient(create_app(settings, run_cluster=False)) as test_client:
        yield test_client


def _expired_token(client: TestClient) -> str:
    header = login(client, "admin")
    with state_of(client).sessions() as session:
        session.execute(
            update(UserSession).values(
                created_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=30),
                expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=23),
            )
        )
        session.commit()
    return header["Authorization"]


@pytest.mark.parametrize(("method", "path"), GUARDED, ids=[f"{m} {p}" for m, p in GUARDED])
def test_route_answers_401_without_a_valid_token(
    shared: TestClient, method: str, path: str
) -> None:
    expired = _expired_token(shared)
    for headers in (
        {},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": expired},
        {"Grpc-Metadata-x-allocation-token": "Bearer not-a-token"},
    ):
        resp = shared.request(method, path, json={}, headers=headers)
        assert resp.status_code == 401, (headers, resp.text)
        assert resp.json()["error"]["reason"] == "Unauthenticated"


def test_public_routes_answer_without_a_token(shared: TestClient) -> None:
    assert shared.get("/info").status_code == 200
    assert shared.get("/").status_code == 200
    bundle = re.search(r'src="(/ui/assets/[^"]+)"', shared.get("/").text)
    assert bundle, "the page names its script bundle"
    assert shared.get(bundle.group(1)).status_code == 200
    assert shared.get("/openapi.json").status_code == 200
    wrong = shared.post(
        "/api/v1/auth/login", json={"username": "admin", "password": "x", "isHashed": True}
    )
    assert wrong.status_code == 401
    assert wrong.json()["message"] == "invalid credentials"


def test_the_ui_gets_no_data_without_a_token(shared: TestClient) -> None:
    """The UI's pages are static; everything they show comes from API calls with a token."""
    assert shared.get("/api/v1/experiments").status_code == 401
    assert shared.get("/api/v1/ui/experiments/1/series?metric=loss").status_code == 401
