"""``/info`` and ``/api/v1/master``: identity and version, and the auth rule around them."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.settings import MasterSettings


def test_info_needs_no_credentials(client: TestClient) -> None:
    resp = client.get("/info")
    assert resp.status_code == 200
    body = resp.json()
    assert body["version"] == "0.38.1"
    assert body["cluster_name"] == "stalwart"
    assert body["master_id"]
    assert body["cluster_id"]


def test_master_answers_without_credentials_and_has_required_keys(
    client: TestClient, admin: dict[str, str]
) -> None:
    # the official client reads the feature flags (rbacEnabled) without a token
    anonymous = client.get("/api/v1/master")
    assert anonymous.status_code == 200
    assert anonymous.json()["rbacEnabled"] is True
    body = client.get("/api/v1/master", headers=admin).json()
    for key in (
        "version",
        "masterId",
        "clusterId",
        "clusterName",
        "hasCustomLogo",
        "strictJobQueueControl",
    ):
        assert key in body


def test_cluster_id_survives_a_restart(settings: MasterSettings) -> None:
    with TestClient(create_app(settings, run_cluster=False)) as first:
        cluster = first.get("/info").json()["cluster_id"]
    with TestClient(create_app(settings, run_cluster=False)) as second:
        assert second.get("/info").json()["cluster_id"] == cluster


def test_master_config_is_for_admins_and_hides_passwords(
    client: TestClient, admin: dict[str, str]
) -> None:
    body = client.get("/api/v1/master/config", headers=admin).json()
    assert "initial_user_password" not in body["config"]["security"]
    assert body["config"]["checkpoint_storage"]["type"] == "shared_fs"
    assert body["config"]["feature_switches"] == []


def test_unknown_route_has_the_error_shape(client: TestClient) -> None:
    resp = client.get("/api/v1/nope")
    assert resp.status_code == 404
    assert resp.json()["error"]["reason"] == "NotFound"


def test_bodies_are_json_whatever_the_content_type(client: TestClient) -> None:
    for headers in ({}, {"Content-Type": "application/x-www-form-urlencoded"}):
        resp = client.post(
            "/api/v1/auth/login",
            content=b'{"username": "admin", "password": "", "isHashed": true}',
            headers=headers,
        )
        assert resp.status_code == 200, resp.text


def test_oversized_requests_are_refused_before_reading(tmp_path: Path) -> None:
    settings = MasterSettings.model_validate(
        {"home": tmp_path, "limits": {"max_request_bytes": 100}}
    )
    with TestClient(create_app(settings, run_cluster=False)) as small:
        resp = small.post("/api/v1/auth/login", content=b"x" * 101)
    assert resp.status_code == 413
    assert "limits.max_request_bytes" in resp.json()["error"]["error"]
