"""Smoke test: the unmodified official ``det`` CLI (determined 0.38.1) against ``stalwart master``.

Each test runs the real client in a subprocess against a real master on loopback (see
``conftest.py``). The wire facts behind each check are in ``determined-wire.md`` sections 1, 2
and 4.1.
"""

from __future__ import annotations

import json

import pytest

from tests.compat.conftest import DET_VERSION, Det, describe

pytestmark = pytest.mark.compat


def _auth_store(det: Det) -> dict[str, object]:
    data: dict[str, object] = json.loads((det.config_dir / "auth.json").read_text("utf-8"))
    return data


def test_client_is_the_official_release(det: Det) -> None:
    done = det.ok("--version")
    assert DET_VERSION in done.stdout + done.stderr


def test_user_login_admin_with_empty_password(det: Det) -> None:
    det.login("admin", "")
    store = _auth_store(det)
    master = store["masters"]
    assert isinstance(master, dict)
    entry = master[det.master.url]
    assert entry["active_user"] == "admin"
    assert entry["tokens"]["admin"]
    whoami = det.ok("user", "whoami")
    assert "You are logged in as user 'admin'" in whoami.stdout


def test_user_login_with_a_wrong_password_is_refused(det: Det) -> None:
    done = det.run("user", "login", "admin", stdin="not-the-password\n")
    assert done.returncode != 0, describe(done)
    assert "Invalid username/password combination" in done.stdout + done.stderr, describe(done)
    assert not (det.config_dir / "auth.json").exists() or "admin" not in json.dumps(
        _auth_store(det).get("masters", {})
    )


def test_master_info(det: Det) -> None:
    det.login()
    info = det.master.info()
    done = det.ok("master", "info")
    assert f"clusterId: {info['cluster_id']}" in done.stdout, describe(done)
    assert f"version: {DET_VERSION}" in done.stdout, describe(done)
    assert "mismatch" not in done.stderr.lower(), describe(done)

    as_json = json.loads(det.ok("master", "info", "--json").stdout)
    assert as_json["clusterId"] == info["cluster_id"]
    assert as_json["version"] == DET_VERSION


def test_master_info_without_login_uses_the_default_user(det: Det) -> None:
    """No cached token: the client logs in as ``determined`` with an empty password."""
    done = det.ok("master", "info")
    assert f"version: {DET_VERSION}" in done.stdout, describe(done)


def test_experiment_list_with_no_experiments(det: Det) -> None:
    det.login()
    done = det.ok("experiment", "list")
    assert "Failed" not in done.stdout + done.stderr, describe(done)
    everyone = det.ok("experiment", "list", "--all")
    assert "Failed" not in everyone.stdout + everyone.stderr, describe(everyone)


def test_experiment_list_with_credentials_from_the_environment(det: Det) -> None:
    """``DET_USER`` + ``DET_PASS`` log in without a cached token (how scripts use the CLI)."""
    done = det.ok("experiment", "list", extra_env={"DET_USER": "admin", "DET_PASS": ""})
    assert "Failed" not in done.stdout + done.stderr, describe(done)
