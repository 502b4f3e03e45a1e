"""``stalwart resource-pool bindings``: resource pools bound to workspaces (Determined's
``det resource-pool bindings``).

``bindings list POOL`` (anyone); ``bindings add|remove|replace POOL WORKSPACE...`` (cluster
admins). A pool bound to workspaces serves only their experiments and tasks; a pool without
bindings serves everyone; default pools cannot be bound.
"""

from __future__ import annotations

from typing import Annotated

import typer

from stalwart.cli.common import client, out, print_json

__all__ = ["app"]

app = typer.Typer(help="Manage resource pools.", no_args_is_help=True)
bindings = typer.Typer(help="Bind resource pools to workspaces.", no_args_is_help=True)
app.add_typer(bindings, name="bindings")

_POOL = typer.Argument(help="The resource pool.")
_WORKSPACES = typer.Argument(help="Workspace names.")


@bindings.command("list")
def list_bindings(
    pool: Annotated[str, _POOL],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The workspaces a pool is bound to."""
    names = client().pool_bindings.list(pool)
    if as_json:
        print_json(names)
    elif names:
        out().print(f"{pool}: {', '.join(names)}", markup=False)
    else:
        out().print(f"{pool}: not bound (serves every workspace)", markup=False)


@bindings.command("add")
def add(pool: Annotated[str, _POOL], workspaces: Annotated[list[str], _WORKSPACES]) -> None:
    """Bind a pool to workspaces too (cluster admins)."""
    client().pool_bindings.add(pool, workspaces)
    out().print(f"Bound {pool} to {', '.join(workspaces)}.", markup=False)


@bindings.command("remove")
def remove(pool: Annotated[str, _POOL], workspaces: Annotated[list[str], _WORKSPACES]) -> None:
    """Unbind a pool from workspaces (cluster admins)."""
    client().pool_bindings.remove(pool, workspaces)
    out().print(f"Unbound {pool} from {', '.join(workspaces)}.", markup=False)


@bindings.command("replace")
def replace(pool: Annotated[str, _POOL], workspaces: Annotated[list[str], _WORKSPACES]) -> None:
    """Bind a pool to exactly these workspaces (cluster admins)."""
    client().pool_bindings.replace(pool, workspaces)
    out().print(f"{pool} is bound to {', '.join(workspaces)} only.", markup=False)
