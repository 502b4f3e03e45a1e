"""``stalwart tensorboard``: a TensorBoard of experiments' and trials' TensorBoard files,
through the master; list, open and kill them.

``start EXP... [-t TRIAL...]`` waits until TensorBoard shows a run, prints its URL under the
master and opens it unless ``--no-browser``; ``-d`` prints the id and returns at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stalwart.cli.common import client
from stalwart.cli.interactive import (
    CONFIG_FILE,
    DETACH,
    OVERRIDES,
    TEMPLATE,
    add_list_and_kill,
    launch_config,
    open_running,
    serve_launched,
)
from stalwart.cli.notebook import NO_BROWSER

__all__ = ["app"]

app = typer.Typer(help="TensorBoards of experiments and trials.", no_args_is_help=True)


@app.command("start")
def start(
    experiment_ids: Annotated[
        list[int] | None, typer.Argument(help="Experiments whose trials to show.")
    ] = None,
    trial_ids: Annotated[
        list[int] | None, typer.Option("--trial-ids", "-t", help="Trials to show (repeatable).")
    ] = None,
    config_file: Annotated[Path | None, CONFIG_FILE] = None,
    overrides: Annotated[list[str] | None, OVERRIDES] = None,
    template: Annotated[str | None, TEMPLATE] = None,
    detach: Annotated[bool, DETACH] = False,
    no_browser: Annotated[bool, NO_BROWSER] = False,
) -> None:
    """Start a TensorBoard and open it once it shows a run."""
    if not experiment_ids and not trial_ids:
        raise typer.BadParameter("give experiments, or trials with -t")
    config = launch_config(config_file, overrides)
    task = client().launch_tensorboard(
        experiment_ids or [], trial_ids or [], config, template=template
    )
    serve_launched(task, detach=detach, browser=not no_browser)


@app.command("open")
def open_board(
    task_id: Annotated[str, typer.Argument(help="The TensorBoard.")],
    no_browser: Annotated[bool, NO_BROWSER] = False,
) -> None:
    """Open a running TensorBoard in the browser (and print its URL)."""
    open_running(client().get_interactive(task_id, "tensorboard"), browser=not no_browser)


add_list_and_kill(app, "tensorboard", "TensorBoards")
