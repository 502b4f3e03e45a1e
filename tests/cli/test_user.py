"""``stalwart user ...`` against a real master."""

from __future__ import annotations

import json
import os
import stat

from tests.cli.conftest import Cli, one_error_line


def test_login_whoami_logout(cli: Cli) -> None:
    result = cli("user", "login", "admin", "--password", "")
    assert result.code == 0, result.err
    assert result.out.strip() == f"Logged in as admin on {cli.url}."
    auth = os.path.join(os.environ["XDG_CONFIG_HOME"], "stalwart", "auth.json")
    assert stat.S_IMODE(os.stat(auth).st_mode) == 0o600
    assert cli("user", "whoami").out.strip() == f"You are logged in as admin (admin) on {cli.url}."
    assert json.loads(cli("user", "whoami", "--json").out)["username"] == "admin"
    assert cli("user", "logout").out.strip() == f"Logged out admin from {cli.url}."
    # nobody logged in: Determined's built-in user with its empty password
    assert "as determined on" in cli("user", "whoami").out


def test_login_prompts_for_the_password(cli: Cli) -> None:
    result = cli("user", "login", "admin", stdin="\n")
    assert result.code == 0, result.err
    assert "Logged in as admin" in result.out


def test_wrong_password_is_one_line_with_a_hint(cli: Cli) -> None:
    result = cli("user", "login", "admin", "--password", "nope")
    assert result.code == 1
    line = one_error_line(result.err)
    assert line == f"error: wrong username or password for 'admin' on {cli.url}"
    assert "hint: try again with `stalwart user login admin`" in result.err


def test_manage_users(cli: Cli) -> None:
    created = cli(
        "user", "create", "cli-alice", "--password", "Pass-wd1", "--display-name", "Alice"
    )
    assert created.code == 0, created.err
    assert created.out.strip() == "Created user cli-alice."
    again = cli("user", "create", "cli-alice", "--password", "x")
    assert again.code == 1
    one_error_line(again.err)
    listing = cli("user", "list")
    assert "cli-alice" in listing.out
    assert "Alice" in listing.out
    users = {u["username"]: u for u in json.loads(cli("user", "list", "--json").out)}
    assert users["admin"]["admin"] is True

    assert cli("user", "login", "cli-alice", "--password", "Pass-wd1").code == 0
    assert "as cli-alice on" in cli("user", "whoami").out
    denied = cli("user", "create", "cli-eve", "--password", "x")  # alice is no admin
    assert denied.code == 1
    one_error_line(denied.err)
    assert cli("user", "change-password", "--password", "Pass-wd2").code == 0
    assert cli("user", "login", "cli-alice", "--password", "Pass-wd1").code == 1
    assert cli("user", "login", "cli-alice", "--password", "Pass-wd2").code == 0

    assert (
        cli("-u", "admin", "user", "change-password", "cli-alice", "--password", "Pass-wd3").code
        == 0
    )
    assert cli("-u", "admin", "user", "deactivate", "cli-alice").out.strip() == (
        "Deactivated user cli-alice."
    )
    inactive = cli("user", "login", "cli-alice", "--password", "Pass-wd3")
    assert inactive.code == 1
    assert one_error_line(inactive.err) == "error: user is not active"
    assert cli("-u", "admin", "user", "activate", "cli-alice").code == 0
    assert cli("user", "login", "cli-alice", "--password", "Pass-wd3").code == 0


def test_unreachable_master_says_what_to_do(cli: Cli) -> None:
    result = cli("-m", "http://127.0.0.1:9", "user", "whoami", master=False)
    assert result.code == 1
    assert one_error_line(result.err).startswith("error: cannot reach the master at")
    assert "stalwart up" in result.err


def test_revoke_sessions(cli: Cli) -> None:
    assert cli("user", "login", "admin", "--password", "").code == 0
    assert cli("user", "create", "cli-rita", "--password", "Pass-wd1").code == 0
    assert cli("user", "login", "cli-rita", "--password", "Pass-wd1").code == 0
    assert cli("user", "login", "admin", "--password", "").code == 0
    result = cli("user", "revoke-sessions", "cli-rita")
    assert result.code == 0, result.err
    assert result.out.strip() == "Ended 1 session(s) of cli-rita."
    assert (
        cli("user", "revoke-sessions", "cli-rita").out.strip() == "Ended 0 session(s) of cli-rita."
    )
