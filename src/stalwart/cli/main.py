"""The ``stalwart`` command: one typer app, one sub-app per noun, one catch point for errors.

Sub-apps raise :class:`~stalwart.errors.StalwartError` (or ``typer.Exit`` for a chosen exit
code); :func:`main` prints a StalwartError as one line (plus its hint) and exits 1. ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.console import Console

from stalwart.cli import common
from stalwart.errors import StalwartError

__all__ = ["build_app", "main"]

_GROUPS: dict[str, tuple[str, str, bool]] = {
    "agent": ("agent", "app", False),
    "config": ("config", "app", False),
    "envs": ("envs", "app", False),
    "master": ("master", "app", False),
    "user": ("user", "app", False),
    "experiment": ("experiment", "app", False),
    "e": ("experiment", "app", True),
    "trial": ("trial", "app", False),
    "t": ("trial", "app", True),
    "checkpoint": ("checkpoint", "app", False),
    "model": ("model", "app", False),
    "slot": ("slot", "app", False),
    "cmd": ("command", "app", False),
    "command": ("command", "app", True),
    "notebook": ("notebook", "app", False),
    "shell": ("shell", "app", False),
    "tensorboard": ("tensorboard", "app", False),
    "task": ("interactive", "app", False),
    "user-group": ("groups", "app", False),
    "resource-pool": ("resource_pool", "app", False),
    "template": ("template", "app", False),
    "token": ("token", "app", False),
    "job": ("job", "app", False),
    "resources": ("resources", "app", False),
    "workspace": ("workspace", "app", False),
    "project": ("workspace", "project_app", False),
    "webhook": ("webhook", "app", False),
    "import": ("importer", "app", False),
}
"""Each noun: (module under ``stalwart.cli``, its typer app's attribute, hidden), in the order
``stalwart --help`` lists them."""
_COMMANDS: dict[str, tuple[str, str]] = {"up": ("up", "up"), "down": ("up", "down")}
"""Top-level commands: (module under ``stalwart.cli``, function)."""
_VALUED_OPTIONS = frozenset({"--master", "-m", "--user", "-u"})


def build_app(only: str | None = None) -> typer.Typer:
    """The ``stalwart`` app with every noun and command, or only ``only``'s: an invocation
    imports the modules of the noun it runs and no other (``stalwart master`` would otherwise
    import the whole client and every command's module, about half a second of CPU)."""
    app = typer.Typer(
        name="stalwart",
        help="Stalwart: an open-source deep-learning training platform.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    for name, (module, attribute, hidden) in _GROUPS.items():
        if only in (None, name):
            group = getattr(importlib.import_module(f"stalwart.cli.{module}"), attribute)
            app.add_typer(group, name=name, hidden=hidden)
    for name, (module, function) in _COMMANDS.items():
        if only in (None, name):
            app.command(name)(getattr(importlib.import_module(f"stalwart.cli.{module}"), function))
    return app


def _chosen(argv: Sequence[str]) -> str | None:
    """The noun or command ``argv`` runs, when it is a known one (past the root's options); None
    when the root's own help comes first (``stalwart --help master`` lists every noun)."""
    args = iter(argv)
    for arg in args:
        if arg in _VALUED_OPTIONS:
            next(args, None)
        elif arg == "--help":
            return None
        elif not arg.startswith("-"):
            return arg if arg in _GROUPS or arg in _COMMANDS else None
    return None


_state = {"debug": False}


def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    master: Annotated[
        str | None,
        typer.Option(
            "--master",
            "-m",
            help="The master's URL (default: STALWART_MASTER, DET_MASTER, http://localhost:8080).",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option("--user", "-u", help="Act as this user (default: the one logged in last)."),
    ] = None,
) -> None:
    """Stalwart: an open-source deep-learning training platform."""
    _state["debug"] = debug
    common.set_connection(master, user)
    ctx.call_on_close(common.close_client)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; the only place that turns StalwartError into output and an exit code.

    Typer's standalone mode handles usage errors and ``typer.Exit``; it always ends in
    SystemExit.
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        build_app(_chosen(args))(args=args)
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
