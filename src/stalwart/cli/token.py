"""``stalwart token``: access tokens (Determined's ``det token``).

``create [USERNAME] [-e DAYS] [-d TEXT]`` prints a new token once (``-e -1``: the longest
lifespan; default 30 days); ``list [USERNAME] [--show-inactive]`` and ``describe ID...`` show
tokens (never the token itself); ``edit ID -d TEXT`` changes a description; ``revoke ID`` stops
a token at once; ``login TOKEN`` makes this client act as the token's user (scripts can instead
set ``DET_USER`` and ``DET_USER_TOKEN``). Users manage their own tokens, admins everyone's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer

from stalwart.cli.common import client, fmt_time, out, print_json, table
from stalwart.client.tokens import TokenInfo

__all__ = ["app"]

app = typer.Typer(help="Create, list and revoke access tokens.", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")


def _show(tokens: Sequence[TokenInfo], as_json: bool) -> None:
    if as_json:
        print_json(list(tokens))
        return
    grid = table("ID", "User ID", "Description", "Created", "Expires", "Revoked")
    for t in tokens:
        grid.add_row(
            str(t.id),
            str(t.user_id),
            t.description or "",
            fmt_time(t.created_at, compact=True),
            fmt_time(t.expiry, compact=True),
            "yes" if t.revoked else "",
        )
    out().print(grid)


@app.command("create")
def create(
    username: Annotated[str | None, typer.Argument(help="Whose token (default: yours).")] = None,
    expiration_days: Annotated[
        int | None,
        typer.Option("--expiration-days", "-e", help="Days it lives (-1: the longest)."),
    ] = None,
    description: Annotated[
        str | None, typer.Option("--description", "-d", help="What it is for.")
    ] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Create an access token and print it (it is never shown again)."""
    token_id, token = client().create_token(
        username, expiration_days=expiration_days, description=description
    )
    if as_json:
        print_json({"tokenId": token_id, "token": token})
        return
    out().print(f"TokenID: {token_id}\nAccess-Token: {token}", markup=False)


@app.command("list")
def list_tokens(
    username: Annotated[str | None, typer.Argument(help="Only this user's (admins).")] = None,
    show_inactive: Annotated[
        bool, typer.Option("--show-inactive", help="Include revoked and expired tokens.")
    ] = False,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """List access tokens: yours (an admin's: everyone's)."""
    _show(client().list_tokens(username, show_inactive=show_inactive), as_json)


@app.command("describe")
def describe(
    token_ids: Annotated[list[int], typer.Argument(help="Token ids.")],
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Show access tokens by id (revoked and expired ones too)."""
    _show(client().list_tokens(token_ids=token_ids, show_inactive=True), as_json)


@app.command("edit")
def edit(
    token_id: Annotated[int, typer.Argument(help="The token id.")],
    description: Annotated[str, typer.Option("--description", "-d", help="A new description.")],
) -> None:
    """Change an access token's description."""
    client().edit_token(token_id, description)
    out().print(f"Updated token {token_id}.", markup=False)


@app.command("revoke")
def revoke(token_id: Annotated[int, typer.Argument(help="The token id.")]) -> None:
    """Revoke an access token: it is refused from now on."""
    client().revoke_token(token_id)
    out().print(f"Revoked token {token_id}.", markup=False)


@app.command("login")
def login(token: Annotated[str, typer.Argument(help="An access token.")]) -> None:
    """Act as the token's user from now on (it becomes the active user)."""
    user = client().login_with_token(token)
    out().print(f"Authenticated as {user.username}.", markup=False)
