"""``stalwart trial`` (alias ``t``): describe a trial, read its logs, kill it."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Annotated, Any

import typer

from stalwart.cli.common import (
    client,
    fmt_mapping,
    fmt_time,
    out,
    print_json,
    state_text,
    table,
)
from stalwart.client import Trial
from stalwart.client.models import TrialLogsResponse, WorkloadContainer

__all__ = ["app", "print_logs", "workload_rows"]

app = typer.Typer(help="Inspect and control trials.", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")


def print_logs(lines: Iterable[TrialLogsResponse]) -> int:
    """Write log lines to stdout as they arrive (Determined's format); how many."""
    count = 0
    for line in lines:
        sys.stdout.write(line.message if line.message.endswith("\n") else line.message + "\n")
        sys.stdout.flush()
        count += 1
    return count


def workload_rows(workloads: Iterable[WorkloadContainer]) -> list[dict[str, Any]]:
    """Workloads merged by batch: ``{batches, training, validation, checkpoint}``, in order."""
    rows: dict[int, dict[str, Any]] = {}
    for item in workloads:
        for kind in ("training", "validation", "checkpoint"):
            part = getattr(item, kind)
            if part is None:
                continue
            row = rows.setdefault(part.total_batches, {"batches": part.total_batches})
            if kind == "checkpoint":
                row[kind] = part.uuid
            else:
                row[kind] = part.metrics.avg_metrics
    return [rows[key] for key in sorted(rows)]


def print_workloads(trial: Trial) -> list[dict[str, Any]]:
    """A table of the trial's metrics by batch; the rows."""
    rows = workload_rows(trial.workloads())
    grid = table("Batches", "Training metrics", "Validation metrics", "Checkpoint")
    for row in rows:
        grid.add_row(
            str(row["batches"]),
            fmt_mapping(row.get("training")),
            fmt_mapping(row.get("validation")),
            row.get("checkpoint") or "",
        )
    grid.title = f"Trial {trial.id} metrics"
    out().print(grid)
    return rows


@app.command("describe")
def describe(
    trial_id: Annotated[int, typer.Argument(help="The trial.")],
    as_json: Annotated[bool, _JSON] = False,
    metrics: Annotated[bool, typer.Option("--metrics", help="Show metrics by batch.")] = False,
) -> None:
    """Show a trial: state, hyperparameters, progress and (with --metrics) its metrics."""
    trial = client().get_trial(trial_id)
    if as_json:
        data: dict[str, Any] = {"trial": trial.data}
        if metrics:
            data["workloads"] = workload_rows(trial.workloads())
        print_json(data)
        return
    info = trial.data
    best = info.best_validation.metrics.avg_metrics if info.best_validation else None
    grid = table("Trial", "Experiment", "State", "Batches", "Restarts", "Started", "Ended")
    grid.add_row(
        str(info.id),
        str(info.experiment_id),
        state_text(info.state),
        str(info.total_batches_processed),
        str(info.restarts),
        fmt_time(info.start_time, compact=True),
        fmt_time(info.end_time, compact=True),
    )
    console = out()
    console.print(grid)
    console.print(f"Hyperparameters: {fmt_mapping(info.hparams)}", markup=False)
    if best:
        console.print(f"Best validation: {fmt_mapping(best)}", markup=False)
    if metrics:
        print_workloads(trial)


@app.command("logs")
def logs(
    trial_id: Annotated[int, typer.Argument(help="The trial.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming until the trial ends.")
    ] = False,
    head: Annotated[int | None, typer.Option(min=1, help="Only the first N lines.")] = None,
    tail: Annotated[int | None, typer.Option(min=1, help="Only the last N lines.")] = None,
) -> None:
    """Print a trial's logs."""
    if head is not None and tail is not None:
        raise typer.BadParameter("give --head or --tail, not both")
    if follow and (head is not None or tail is not None):
        raise typer.BadParameter("--follow cannot be combined with --head or --tail")
    print_logs(client().get_trial(trial_id).logs(follow=follow, head=head, tail=tail))


@app.command("kill")
def kill(trial_id: Annotated[int, typer.Argument(help="The trial.")]) -> None:
    """Kill a trial (its experiment goes on with the others)."""
    client().get_trial(trial_id).kill()
    out().print(f"Killed trial {trial_id}.", markup=False)
