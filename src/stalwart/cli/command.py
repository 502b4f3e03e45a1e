"""``stalwart cmd``: run a command on the cluster, list, kill and read commands.

``run [-c DIR] [--config KEY=VALUE] [-d] -- CMD...`` streams the command's output (its stderr
to stderr) until it ends and exits with the command's exit code (Determined's ``det cmd run``
exits 0 whatever the command did). One word is a shell line (``"make | tee log"``, run under
``sh -c``); several are the argv. ``-d`` prints the id and returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stalwart.cli.common import client, err, out
from stalwart.cli.interactive import (
    CONFIG_FILE,
    CONTEXT,
    DETACH,
    INCLUDES,
    OVERRIDES,
    TEMPLATE,
    add_list_and_kill,
    launch_config,
    print_task_logs,
)

__all__ = ["app", "exit_code_of"]

app = typer.Typer(help="Run commands on the cluster.", no_args_is_help=True)


def exit_code_of(code: int | None, exit_status: str | None) -> int:
    """The CLI's exit code for a command that ended: its own, else 1 unless it exited 0."""
    if code is not None:
        return code if 0 <= code <= 255 else 1
    return 0 if exit_status == "exited with code 0" else 1


@app.command(
    "run", context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True}
)
def run(
    entrypoint: Annotated[list[str], typer.Argument(help="The command (after --).")],
    context: Annotated[Path | None, CONTEXT] = None,
    config_file: Annotated[Path | None, CONFIG_FILE] = None,
    overrides: Annotated[list[str] | None, OVERRIDES] = None,
    includes: Annotated[list[Path] | None, INCLUDES] = None,
    template: Annotated[str | None, TEMPLATE] = None,
    detach: Annotated[bool, DETACH] = False,
) -> None:
    """Run a command; stream its output and exit with its exit code."""
    config = launch_config(config_file, overrides)
    task = client().launch_command(
        entrypoint, config, context, includes=includes or [], template=template
    )
    if detach:
        out().print(task.id, markup=False)
        return
    err().print(f"Launched command {task.id}", markup=False)
    print_task_logs(task.logs(follow=True), split=True)
    task.reload()
    if not task.ended:  # the stream broke off before the end
        task.wait(interval=0.25)
    code = exit_code_of(task.exit_code(), task.exit_status)
    if code != 0:
        err().print(f"Command {task.id} {task.exit_status or 'failed'}", markup=False)
    raise typer.Exit(code)


@app.command("logs")
def logs(
    task_id: Annotated[str, typer.Argument(help="The command.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming until it ends.")
    ] = False,
) -> None:
    """Print a command's output."""
    print_task_logs(client().task_logs(task_id, follow=follow))


add_list_and_kill(app, "command", "commands")
