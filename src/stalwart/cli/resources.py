"""``stalwart resources``: historical usage, for admins (Determined's ``det resources``).

``allocations START END`` prints the allocations CSV (one row per allocation that held slots
between two RFC 3339 times, with its image pull seconds); ``raw START END [--json]`` the same
allocations as entries; ``aggregated START_DATE END_DATE [--monthly] [--by user|label|
resource-pool|agent] [--json]`` slot-hours per day or month, in total or by one grouping.
"""

from __future__ import annotations

import sys
from typing import Annotated, Literal

import typer

from stalwart.cli.common import client, fmt_float, out, print_json, table

__all__ = ["app"]

app = typer.Typer(help="Historical usage of the cluster (admins).", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")


@app.command("allocations")
def allocations(
    start: Annotated[str, typer.Argument(help="From (RFC 3339, e.g. 2025-01-01T00:00:00Z).")],
    end: Annotated[str, typer.Argument(help="To (RFC 3339).")],
) -> None:
    """Print the allocations CSV, with each allocation's image pull seconds."""
    sys.stdout.write(client().usage_csv(start, end))


@app.command("raw")
def raw(
    start: Annotated[str, typer.Argument(help="From (RFC 3339).")],
    end: Annotated[str, typer.Argument(help="To (RFC 3339).")],
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """List the allocations that held slots in the window."""
    entries = client().usage_raw(start, end)
    if as_json:
        print_json(entries)
        return
    grid = table("Allocation", "Kind", "User", "Exp", "Slots", "Pool", "Seconds", "Pull s")
    for e in entries:
        grid.add_row(
            e.allocation_id,
            e.kind,
            e.username,
            "" if e.experiment_id is None else str(e.experiment_id),
            str(e.slots),
            e.resource_pool,
            fmt_float(e.seconds),
            "" if e.pull_seconds is None else fmt_float(e.pull_seconds),
        )
    out().print(grid)


_BY = {
    "user": "by_username",
    "label": "by_experiment_label",
    "resource-pool": "by_resource_pool",
    "agent": "by_agent",
}


@app.command("aggregated")
def aggregated(
    start_date: Annotated[str, typer.Argument(help="First day (YYYY-MM-DD).")],
    end_date: Annotated[str, typer.Argument(help="Last day (YYYY-MM-DD), included.")],
    monthly: Annotated[bool, typer.Option("--monthly", help="Per month, not per day.")] = False,
    by: Annotated[
        Literal["user", "label", "resource-pool", "agent"] | None,
        typer.Option("--by", help="Split by user, label, resource-pool or agent."),
    ] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Slot-hours per day (or month), in total or split by one grouping."""
    entries = client().usage_aggregated(start_date, end_date, monthly=monthly)
    if as_json:
        print_json(entries)
        return
    grid = table("Period", by or "total", "Slot hours")
    for e in entries:
        if by is None:
            grid.add_row(e.period_start, "", fmt_float(e.seconds / 3600))
            continue
        values: dict[str, float] = getattr(e, _BY[by])
        for key, seconds in sorted(values.items()):
            grid.add_row(e.period_start, key, fmt_float(seconds / 3600))
    out().print(grid)
