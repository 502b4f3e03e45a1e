"""``stalwart user``: log in and out, and manage users (Determined's ``det user``).

``login [USERNAME]`` prompts for the password unless ``--password`` is given (without a
terminal it reads one line of stdin: ``echo "$PW" | stalwart user login alice``), caches the
token in the user's config directory and makes USERNAME the active user of the master. Other
commands act as the active user unless ``-u`` says otherwise.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from stalwart.cli.common import client, fmt_time, out, print_json, table
from stalwart.client.models import V1User

__all__ = ["app"]

app = typer.Typer(help="Log in and out, and manage users.", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")
_PASSWORD = typer.Option(
    "--password", help="The password (prompted for when omitted; empty is allowed)."
)


def _password(prompt: str, *, confirm: bool) -> str:
    """Prompt without echo on a terminal; otherwise read one line of stdin (for scripts)."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    value: str = typer.prompt(
        prompt, hide_input=True, confirmation_prompt=confirm, default="", show_default=False
    )
    return value


def _yes(value: bool) -> str:
    return "yes" if value else ""


@app.command("login")
def login(
    username: Annotated[str | None, typer.Argument(help="Who to log in as.")] = None,
    password: Annotated[str | None, _PASSWORD] = None,
) -> None:
    """Log in and remember the session for later commands."""
    if username is None:
        username = typer.prompt("Username")
    if password is None:
        password = _password(f"Password for {username}", confirm=False)
    api = client()
    api.login(username, password)
    out().print(f"Logged in as {username} on {api.master}.", markup=False)


@app.command("logout")
def logout() -> None:
    """End the session of the current user and forget its token."""
    api = client()
    user = api.user
    api.logout()
    out().print(f"Logged out {user} from {api.master}.", markup=False)


@app.command("whoami")
def whoami(as_json: Annotated[bool, _JSON] = False) -> None:
    """Show who commands run as."""
    api = client()
    me = api.whoami()
    if as_json:
        print_json(me)
        return
    role = " (admin)" if me.admin else ""
    out().print(f"You are logged in as {me.username}{role} on {api.master}.", markup=False)


def _users_table(users: list[V1User]) -> None:
    grid = table("ID", "Username", "Display name", "Admin", "Active", "Remote", "Last login")
    for user in users:
        grid.add_row(
            str(user.id or ""),
            user.username,
            user.display_name or "",
            _yes(user.admin),
            _yes(user.active),
            _yes(user.remote),
            fmt_time(user.last_auth_at, compact=True),
        )
    out().print(grid)


@app.command("list")
def list_users(as_json: Annotated[bool, _JSON] = False) -> None:
    """List users."""
    users = client().list_users()
    if as_json:
        print_json(users)
    else:
        _users_table(users)


@app.command("create")
def create(
    username: Annotated[str, typer.Argument(help="The new user's name.")],
    admin: Annotated[bool, typer.Option("--admin", help="Make the user an admin.")] = False,
    password: Annotated[str | None, _PASSWORD] = None,
    display_name: Annotated[str | None, typer.Option(help="A display name.")] = None,
) -> None:
    """Create a user (admins only)."""
    if password is None:
        password = _password(f"Password for {username}", confirm=True)
    user = client().create_user(username, password=password, admin=admin, display_name=display_name)
    out().print(f"Created user {user.username}{' (admin)' if user.admin else ''}.", markup=False)


@app.command("change-password")
def change_password(
    username: Annotated[
        str | None, typer.Argument(help="Whose password (default: yours; others need admin).")
    ] = None,
    password: Annotated[str | None, _PASSWORD] = None,
) -> None:
    """Set a password."""
    api = client()
    target = username or api.user
    if password is None:
        password = _password(f"New password for {target}", confirm=True)
    api.change_password(password, username)
    out().print(f"Changed the password of {target}.", markup=False)


@app.command("revoke-sessions")
def revoke_sessions(username: Annotated[str, typer.Argument(help="The user.")]) -> None:
    """End every session of a user: all their tokens stop working (admins, or yourself)."""
    ended = client().revoke_sessions(username)
    out().print(f"Ended {ended} session(s) of {username}.", markup=False)


@app.command("activate")
def activate(username: Annotated[str, typer.Argument(help="The user.")]) -> None:
    """Let a user log in again (admins only)."""
    client().activate_user(username)
    out().print(f"Activated user {username}.", markup=False)


@app.command("deactivate")
def deactivate(username: Annotated[str, typer.Argument(help="The user.")]) -> None:
    """Stop a user from logging in and end their sessions (admins only)."""
    client().deactivate_user(username)
    out().print(f"Deactivated user {username}.", markup=False)
