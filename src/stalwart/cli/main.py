"""The ``stalwart`` command: one typer app, one sub-app per noun, one catch point for errors.

Sub-apps raise :class:`~stalwart.errors.StalwartError` (or ``typer.Exit`` for a chosen exit
code); :func:`main` prints a StalwartError as one line (plus its hint) and exits 1. ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from stalwart.cli import agent as agent_cli
from stalwart.cli import config as config_cli
from stalwart.cli import envs as envs_cli
from stalwart.cli import master as master_cli
from stalwart.cli import up as up_cli
from stalwart.errors import StalwartError

__all__ = ["app", "main"]

app = typer.Typer(
    name="stalwart",
    help="Stalwart: an open-source deep-learning training platform.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(agent_cli.app, name="agent")
app.add_typer(config_cli.app, name="config")
app.add_typer(envs_cli.app, name="envs")
app.add_typer(master_cli.app, name="master")
app.command("up")(up_cli.up)
app.command("down")(up_cli.down)

_state = {"debug": False}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    """Stalwart: an open-source deep-learning training platform."""
    _state["debug"] = debug


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; the only place that turns StalwartError into output and an exit code.

    Typer's standalone mode handles usage errors and ``typer.Exit``; it always ends in
    SystemExit.
    """
    try:
        app(args=argv)
    except StalwartError as exc:
        if _state["debug"]:
            raise
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        err.print("error:", style="bold red", end=" ")
        err.print(exc.message, markup=False)
        if exc.hint:
            err.print("hint:", style="yellow", end=" ")
            err.print(exc.hint, markup=False)
        sys.exit(1)
