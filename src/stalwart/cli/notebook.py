"""``stalwart notebook``: start JupyterLab on the cluster, open it through the master, list and
kill notebooks.

``start`` waits until JupyterLab answers, prints its URL under the master (with the notebook's
token: only its owner and admins are told it) and opens it in the browser unless
``--no-browser``; ``-d`` prints the id and returns at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stalwart.cli.common import client
from stalwart.cli.interactive import (
    CONFIG_FILE,
    CONTEXT,
    DETACH,
    INCLUDES,
    OVERRIDES,
    TEMPLATE,
    add_list_and_kill,
    launch_config,
    open_running,
    serve_launched,
)

__all__ = ["NO_BROWSER", "app"]

app = typer.Typer(help="JupyterLab notebooks on the cluster.", no_args_is_help=True)

NO_BROWSER = typer.Option("--no-browser", help="Print the URL; do not open a browser.")


@app.command("start")
def start(
    context: Annotated[Path | None, CONTEXT] = None,
    config_file: Annotated[Path | None, CONFIG_FILE] = None,
    overrides: Annotated[list[str] | None, OVERRIDES] = None,
    includes: Annotated[list[Path] | None, INCLUDES] = None,
    template: Annotated[str | None, TEMPLATE] = None,
    detach: Annotated[bool, DETACH] = False,
    no_browser: Annotated[bool, NO_BROWSER] = False,
) -> None:
    """Start a notebook and open it once it is ready."""
    config = launch_config(config_file, overrides)
    task = client().launch_notebook(config, context, includes=includes or [], template=template)
    serve_launched(task, detach=detach, browser=not no_browser)


@app.command("open")
def open_notebook(
    task_id: Annotated[str, typer.Argument(help="The notebook.")],
    no_browser: Annotated[bool, NO_BROWSER] = False,
) -> None:
    """Open a running notebook in the browser (and print its URL)."""
    open_running(client().get_interactive(task_id, "notebook"), browser=not no_browser)


add_list_and_kill(app, "notebook", "notebooks")
