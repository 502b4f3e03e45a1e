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
from stalwart.cli import checkpoint as checkpoint_cli
from stalwart.cli import command as command_cli
from stalwart.cli import common
from stalwart.cli import config as config_cli
from stalwart.cli import envs as envs_cli
from stalwart.cli import experiment as experiment_cli
from stalwart.cli import groups as groups_cli
from stalwart.cli import importer as importer_cli
from stalwart.cli import interactive as task_cli
from stalwart.cli import job as job_cli
from stalwart.cli import master as master_cli
from stalwart.cli import model as model_cli
from stalwart.cli import notebook as notebook_cli
from stalwart.cli import resource_pool as resource_pool_cli
from stalwart.cli import resources as resources_cli
from stalwart.cli import shell as shell_cli
from stalwart.cli import slot as slot_cli
from stalwart.cli import template as template_cli
from stalwart.cli import tensorboard as tensorboard_cli
from stalwart.cli import token as token_cli
from stalwart.cli import trial as trial_cli
from stalwart.cli import up as up_cli
from stalwart.cli import user as user_cli
from stalwart.cli import webhook as webhook_cli
from stalwart.cli import workspace as workspace_cli
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
app.add_typer(user_cli.app, name="user")
app.add_typer(experiment_cli.app, name="experiment")
app.add_typer(experiment_cli.app, name="e", hidden=True)
app.add_typer(trial_cli.app, name="trial")
app.add_typer(trial_cli.app, name="t", hidden=True)
app.add_typer(checkpoint_cli.app, name="checkpoint")
app.add_typer(model_cli.app, name="model")
app.add_typer(slot_cli.app, name="slot")
app.add_typer(command_cli.app, name="cmd")
app.add_typer(command_cli.app, name="command", hidden=True)
app.add_typer(notebook_cli.app, name="notebook")
app.add_typer(shell_cli.app, name="shell")
app.add_typer(tensorboard_cli.app, name="tensorboard")
app.add_typer(task_cli.app, name="task")
app.add_typer(groups_cli.app, name="user-group")
app.add_typer(resource_pool_cli.app, name="resource-pool")
app.add_typer(template_cli.app, name="template")
app.add_typer(token_cli.app, name="token")
app.add_typer(job_cli.app, name="job")
app.add_typer(resources_cli.app, name="resources")
app.add_typer(workspace_cli.app, name="workspace")
app.add_typer(workspace_cli.project_app, name="project")
app.add_typer(webhook_cli.app, name="webhook")
app.add_typer(importer_cli.app, name="import")
app.command("up")(up_cli.up)
app.command("down")(up_cli.down)

_state = {"debug": False}


@app.callback()
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
