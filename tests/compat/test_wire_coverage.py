"""The official client's REST surface against Stalwart's routes (:mod:`tests.compat.wire_coverage`).

Prints the figures; fails when the generated section of docs/migrating-from-determined.md is
stale (rewrite it with ``python -m tests.compat.wire_coverage --write``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI

from tests.compat import wire_coverage as wc


def _package(det_venv: Path) -> Path:
    found = sorted(det_venv.glob("lib/python3.*/site-packages/determined"))
    assert found, f"no determined package in {det_venv}"
    return found[0]


def test_the_docs_show_the_measured_coverage(det_venv: Path, tmp_path: Path) -> None:
    coverage = wc.measure(_package(det_venv), tmp_path / "home")
    for area in wc.AREAS:
        done, skipped, missing = coverage.counts(area)
        print(f"{area}: {done} served, {skipped} out of scope, {missing} not served yet")
    assert wc.current_section() == wc.render(coverage), (
        "docs/migrating-from-determined.md's coverage section is stale: run "
        "`python -m tests.compat.wire_coverage --write`"
    )


def test_the_bindings_are_read_with_their_methods_and_paths(det_venv: Path) -> None:
    calls = wc.binding_calls(_package(det_venv) / "common" / "api" / "bindings.py")
    by_name = {call.name: call for call in calls}
    assert by_name["get_GetMaster"] == wc.Call("get_GetMaster", "GET", "/api/v1/master")
    assert by_name["post_ActivateExperiment"].path == "/api/v1/experiments/{id}/activate"
    assert len(calls) > 250


def _app(*specs: tuple[str, str]) -> FastAPI:
    """An app whose one router (prefix ``/api/v1``) registers ``(method, path)`` in order, as
    the master includes its routers; a ``{name_id}`` parameter is an integer, others strings."""
    router = APIRouter()
    for method, path in specs:
        params = re.findall(r"\{(\w+)\}", path)
        signature = ", ".join(f"{p}: {'int' if p.endswith('_id') else 'str'}" for p in params)
        namespace: dict[str, Any] = {}
        exec(f"def endpoint({signature}) -> None:\n    return None", namespace)
        router.add_api_route(path, namespace["endpoint"], methods=[method])
    app = FastAPI()
    app.include_router(router, prefix="/api/v1")
    return app


def test_the_first_matching_route_decides_as_in_the_master() -> None:
    routes = wc.app_routes(
        _app(
            ("PATCH", "/trials/{trial_id}"),
            ("GET", "/trials/time-series"),
            ("GET", "/trials/{trial_id}"),
            ("GET", "/agents/{agent_id}"),
            ("GET", "/agents/tokens"),
            ("POST", "/models/{name}"),
        )
    )
    assert wc.served(routes, "GET", "/api/v1/trials/{trialId}")
    # registered before the integer route of the same method: served, even though PATCH
    # /trials/{trial_id} came first (the OpenAPI description would list it under that path)
    assert wc.served(routes, "GET", "/api/v1/trials/time-series")
    # a literal segment that an integer parameter registered first takes: 400, not served
    assert not wc.served(routes, "GET", "/api/v1/agents/tokens")
    assert not wc.served(routes, "DELETE", "/api/v1/trials/{trialId}")  # 405
    assert wc.served(routes, "POST", "/api/v1/models/{modelName}")
    assert not wc.served(routes, "POST", "/api/v1/models/{modelName}/versions")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/roles/search/by-ids", "enterprise"),
        ("/api/v1/config-policies/global/{workloadType}", "enterprise"),
        ("/api/v1/workspaces/{id}/namespace-bindings", "Kubernetes"),
        ("/api/v1/experiments", None),
    ],
)
def test_calls_out_of_scope_say_why(path: str, expected: str | None) -> None:
    reason = next((r for p, r in wc.OUT_OF_SCOPE if re.search(p, path)), None)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None
        assert expected in reason
