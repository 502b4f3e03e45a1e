"""What Stalwart's own client shows for the security answers, against a real HTTP master."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.client import Client
from stalwart.errors import TooManyRequestsError, UnauthenticatedError
from tests.master.test_allocations_api import live_server
from tests.security.conftest import make_settings


def test_a_locked_out_login_says_how_long_to_wait(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", security={"login_max_failures": 2})
    with live_server(settings) as server:
        api = Client(server.url, config_dir=tmp_path / "client")
        try:
            api.login("admin", "")
            for _ in range(2):
                with pytest.raises(Exception, match="wrong username or password"):
                    api.login("admin", "wrong")
            with pytest.raises(TooManyRequestsError) as refused:
                api.login("admin", "")
            message = str(refused.value)
            assert "too many failed logins for user 'admin'" in message
            assert "try again in" in message
            assert "stalwartignore" not in message
        finally:
            api.close()


def test_revoked_sessions_end_the_clients_token(tmp_path: Path) -> None:
    with live_server(make_settings(tmp_path / "home")) as server:
        admin = Client(server.url, config_dir=tmp_path / "admin")
        try:
            admin.login("admin", "")
            assert admin.revoke_sessions("admin") >= 1
            with pytest.raises(UnauthenticatedError, match="revoked session token: log in again"):
                admin.whoami()
        finally:
            admin.close()
        # a later client finds the dead token in its cache and logs in again once
        later = Client(server.url, "admin", "", config_dir=tmp_path / "admin")
        try:
            assert later.whoami().username == "admin"
        finally:
            later.close()
