"""What the interactive nouns share (``cmd``, ``notebook``, ``shell``, ``tensorboard``), and
``stalwart task``: every interactive task in one list, any task's logs, kill by id.

Launch options are Determined's: ``--config-file FILE``, ``--config KEY=VALUE`` (repeatable),
``-c/--context DIR``, ``-i/--include PATH``, ``--template NAME``, ``-d/--detach`` (print the
id and return).
"""

from __future__ import annotations

import sys
import webbrowser
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from stalwart.cli.common import client, err, fmt_time, out, print_json, state_text, table
from stalwart.cli.experiment import apply_overrides
from stalwart.client import InteractiveTask, TaskKind
from stalwart.client.models import TaskLogsResponse
from stalwart.config.loader import read_yaml
from stalwart.errors import ConfigError, FailedPreconditionError

__all__ = [
    "CONFIG_FILE",
    "CONTEXT",
    "DETACH",
    "INCLUDES",
    "JSON",
    "OVERRIDES",
    "TEMPLATE",
    "add_list_and_kill",
    "app",
    "kill_one",
    "launch_config",
    "list_kind",
    "open_running",
    "open_url",
    "print_task_logs",
    "serve_launched",
    "wait_ready",
]

app = typer.Typer(
    help="All interactive tasks: list them, read their logs, kill them.", no_args_is_help=True
)

JSON = typer.Option("--json", help="Print JSON.")
CONFIG_FILE = typer.Option("--config-file", help="The task config (YAML).")
OVERRIDES = typer.Option("--config", help="KEY=VALUE set in the config (repeatable; a.b=c nests).")
CONTEXT = typer.Option("--context", "-c", help="Upload this directory (the working directory).")
INCLUDES = typer.Option("--include", "-i", help="Also upload this file or directory.")
TEMPLATE = typer.Option("--template", help="A config template.")
DETACH = typer.Option("--detach", "-d", help="Print the task's id and return at once.")

_KIND_NAMES = {
    "command": "Command",
    "notebook": "Notebook",
    "shell": "Shell",
    "tensorboard": "TensorBoard",
}


def launch_config(config_file: Path | None, overrides: list[str] | None) -> dict[str, Any]:
    """The config of ``--config-file`` with the ``--config`` overrides applied."""
    config: dict[str, Any] = {}
    if config_file is not None:
        data = read_yaml(config_file).data
        if data is not None and not isinstance(data, dict):
            raise ConfigError(str(config_file), ["<config>: must be a mapping of task settings"])
        config = dict(data or {})
    return apply_overrides(config, overrides or []) if overrides else config


def wait_ready(task: InteractiveTask) -> InteractiveTask:
    """Wait (with a spinner on a terminal) until the task's service is ready."""
    console = err()
    what = _KIND_NAMES[task.kind]
    if not console.is_terminal:
        console.print(f"Waiting for {what.lower()} {task.id} to be ready...", markup=False)
        return task.wait_ready(interval=0.25)
    with console.status(f"{what} {task.id}: {task.state}") as status:

        def show(polled: InteractiveTask) -> None:
            status.update(f"{what} {polled.id}: {polled.state}")

        return task.wait_ready(interval=0.25, on_poll=show)


def open_url(url: str, *, browser: bool) -> None:
    """Print ``url`` and, with ``browser``, open it in the user's web browser."""
    out().print(url, markup=False, soft_wrap=True)
    if browser:
        webbrowser.open(url)


def serve_launched(task: InteractiveTask, *, detach: bool, browser: bool) -> None:
    """After a notebook's or TensorBoard's launch: its id (``detach``), or wait until it is
    ready, then print its URL (and open it with ``browser``)."""
    what = _KIND_NAMES[task.kind]
    if detach:
        out().print(task.id, markup=False)
        return
    err().print(f"Launched {what.lower()} {task.id}", markup=False)
    task = wait_ready(task)
    err().print(f"{what} {task.id} is running at:", markup=False)
    open_running(task, browser=browser)


def open_running(task: InteractiveTask, *, browser: bool) -> None:
    """Print (and with ``browser`` open) the URL of a running notebook or TensorBoard."""
    if task.ended or task.url is None:
        raise FailedPreconditionError(
            f"{_KIND_NAMES[task.kind].lower()} {task.id} is {task.state}",
            hint=f"start one with `stalwart {task.kind} start`",
        )
    open_url(task.url, browser=browser)


def print_task_logs(lines: Iterable[TaskLogsResponse], *, split: bool = False) -> int:
    """Write a task's raw log lines as they arrive; how many. ``split``: only what the task
    wrote to stdout goes to stdout; its stderr and the agent's and master's notes
    (``container exited with code 0``) go to stderr, so a command's output can be piped."""
    count = 0
    for line in lines:
        text = line.log if line.log.endswith("\n") else line.log + "\n"
        own = line.source in (None, "task") and line.stdtype != "stderr"
        stream = sys.stderr if split and not own else sys.stdout
        stream.write(text)
        stream.flush()
        count += 1
    return count


def _rows(tasks: Iterable[InteractiveTask], *, kinds: bool) -> None:
    columns = ["Id", "Kind"] if kinds else ["Id"]
    grid = table(*columns, "Description", "Owner", "State", "Started", "Exit status")
    for task in tasks:
        cells = [task.id, _KIND_NAMES[task.kind]] if kinds else [task.id]
        grid.add_row(
            *cells,
            task.description,
            task.owner,
            state_text(task.state),
            fmt_time(task.data.start_time, compact=True),
            task.exit_status or "",
        )
    out().print(grid)


def list_kind(kind: TaskKind | None, *, everyone: bool, as_json: bool) -> None:
    """List the caller's tasks of ``kind`` (None: all four kinds; ``everyone``: all users')."""
    api = client()
    users = None if everyone else [api.user]
    tasks = api.list_interactive(kind, users=users)
    if as_json:
        wire = [t.data.model_dump(mode="json", by_alias=True) for t in tasks]
        print_json([{"kind": t.kind, **data} for t, data in zip(tasks, wire, strict=True)])
        return
    _rows(tasks, kinds=kind is None)


def add_list_and_kill(noun: typer.Typer, kind: TaskKind, plural: str) -> None:
    """Give a noun's app its ``list`` and ``kill`` commands (the same for every kind)."""

    # Plain defaults, not Annotated: the help names the kind, a value the (postponed, string)
    # annotations could not see.
    def list_noun(
        everyone: bool = typer.Option(False, "--all", "-a", help="Everyone's, not only yours."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        list_kind(kind, everyone=everyone, as_json=as_json)

    def kill_noun(task_id: str = typer.Argument(..., help=f"The {kind}.")) -> None:
        kill_one(task_id, kind)

    noun.command("list", help=f"List {plural}.")(list_noun)
    noun.command("kill", help=f"Kill a {kind}.")(kill_noun)


def kill_one(task_id: str, kind: TaskKind | None) -> None:
    """Kill one task and say so."""
    task = client().get_interactive(task_id, kind)
    task.kill()
    out().print(f"Killed {_KIND_NAMES[task.kind].lower()} {task.id}.", markup=False)


@app.command("list")
def list_tasks(
    everyone: Annotated[bool, typer.Option("--all", "-a", help="Everyone's, not only yours.")] = (
        False
    ),
    as_json: Annotated[bool, JSON] = False,
) -> None:
    """List commands, notebooks, shells and TensorBoards."""
    list_kind(None, everyone=everyone, as_json=as_json)


@app.command("logs")
def logs(
    task_id: Annotated[str, typer.Argument(help="The task.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming until the task ends.")
    ] = False,
    head: Annotated[int | None, typer.Option(min=1, help="Only the first N lines.")] = None,
    tail: Annotated[int | None, typer.Option(min=1, help="Only the last N lines.")] = None,
) -> None:
    """Print a task's logs."""
    if head is not None and tail is not None:
        raise typer.BadParameter("give --head or --tail, not both")
    if follow and (head is not None or tail is not None):
        raise typer.BadParameter("--follow cannot be combined with --head or --tail")
    print_task_logs(client().task_logs(task_id, follow=follow, head=head, tail=tail))


@app.command("kill")
def kill(task_id: Annotated[str, typer.Argument(help="The task.")]) -> None:
    """Kill a command, notebook, shell or TensorBoard."""
    kill_one(task_id, None)
