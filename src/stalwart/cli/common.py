"""What the CLI's noun modules share: the global options, the client, and output helpers.

The root callback (:mod:`stalwart.cli.main`) calls :func:`set_connection` with ``-m/--master``
and ``-u/--user``; commands call :func:`client` for a :class:`~stalwart.client.Client` made from
them (one per invocation, closed when the command ends). Output: tables and text go to stdout
through :func:`out`; progress, spinners and notes go to stderr through :func:`err`, so
``--json`` output stays clean for pipes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # the client is imported when a command first needs one: `stalwart master`
    # and `stalwart agent` never do
    from stalwart.client import Client
    from stalwart.client.session import Progress as ProgressCallback

__all__ = [
    "client",
    "close_client",
    "err",
    "fmt_float",
    "fmt_mapping",
    "fmt_time",
    "out",
    "print_json",
    "set_connection",
    "state_text",
    "table",
    "transfer_progress",
    "use_master",
]

_connection: dict[str, str | None] = {"master": None, "user": None}
_clients: list[Client] = []

_STATE_STYLES = {
    "COMPLETED": "green",
    "ACTIVE": "cyan",
    "RUNNING": "cyan",
    "QUEUED": "yellow",
    "PULLING": "yellow",
    "STARTING": "yellow",
    "PAUSED": "yellow",
    "ERROR": "red",
    "CANCELED": "magenta",
    "DELETED": "dim",
}


def set_connection(master: str | None, user: str | None) -> None:
    """Record the global ``-m`` and ``-u`` options (None: the environment's or the default)."""
    close_client()
    _connection["master"], _connection["user"] = master, user


def use_master(master: str) -> None:
    """Point this invocation's client at ``master`` unless ``-m`` already chose one."""
    if _connection["master"] is None:
        close_client()
        _connection["master"] = master


def client() -> Client:
    """The client for this invocation (made on first use)."""
    if not _clients:
        from stalwart.client import Client

        _clients.append(Client(master=_connection["master"], user=_connection["user"]))
    return _clients[0]


def close_client() -> None:
    """Close the invocation's client, if one was made."""
    while _clients:
        _clients.pop().close()


_PIPE_WIDTH = 160
"""Width of tables written to a pipe or file (a terminal's own width is used otherwise)."""


def out() -> Console:
    """Console for results (stdout); wide when stdout is not a terminal, so that tables piped
    to ``grep`` keep one row per line."""
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal and console.width < _PIPE_WIDTH:
        console = Console(highlight=False, soft_wrap=False, width=_PIPE_WIDTH)
    return console


def err() -> Console:
    """Console for progress and notes (stderr)."""
    return Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    """Print JSON (pydantic models in their wire form) to stdout."""

    def default(value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json", by_alias=True)
        raise TypeError(f"cannot encode {type(value).__name__}")

    print(json.dumps(data, indent=2, default=default))


def state_text(state: str) -> Text:
    """A state (without ``STATE_``) in its colour."""
    state = state.removeprefix("STATE_")
    return Text(state, style=_STATE_STYLES.get(state, ""))


def fmt_time(value: str | None, *, compact: bool = False) -> str:
    """An RFC 3339 time as local ``YYYY-MM-DD HH:MM:SS`` (``""`` for None).

    ``compact`` (for tables): ``HH:MM:SS`` for today, ``YYYY-MM-DD HH:MM`` otherwise.
    """
    if not value:
        return ""
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return value
    if not compact:
        return when.strftime("%Y-%m-%d %H:%M:%S")
    if when.date() == dt.datetime.now().astimezone().date():
        return when.strftime("%H:%M:%S")
    return when.strftime("%Y-%m-%d %H:%M")


def fmt_float(value: Any) -> str:
    """Numbers compactly (``0.1235``, ``12``), anything else as ``str``; ``""`` for None."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def fmt_mapping(values: Mapping[str, Any] | None) -> str:
    """``a=1, b=0.5`` (``""`` for None or empty)."""
    return ", ".join(f"{k}={fmt_float(v)}" for k, v in (values or {}).items())


_FOLDING = frozenset(
    {"Name", "Hyperparameters", "Training metrics", "Validation metrics", "Addresses", "Device"}
)
"""Columns that may wrap on a narrow terminal; the others (ids, UUIDs, times) never do."""


def table(*columns: str, title: str | None = None) -> Table:
    """A table in the CLI's style (no borders; ids, UUIDs and times kept on one line)."""
    result = Table(
        title=title,
        title_justify="left",
        header_style="bold",
        box=None,
        pad_edge=False,
    )
    for column in columns:
        result.add_column(column, overflow="fold", no_wrap=column not in _FOLDING)
    return result


@contextmanager
def transfer_progress(description: str) -> Iterator[ProgressCallback]:
    """A progress bar on stderr (only on a terminal) and its ``progress(done, total)``."""
    console = err()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    task = bar.add_task(description, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update
