"""``stalwart job``: the job queue (Determined's ``det job``).

``list [-p POOL] [--json]`` shows jobs in the order the scheduler takes them (``#`` is the
number of jobs ahead in the pool). ``update JOB_ID`` with ``--priority N`` (priority
scheduler), ``--weight W`` (fair-share scheduler), ``--ahead-of JOB`` or ``--behind-of JOB``
(priority scheduler) changes one job; a change the pool's scheduler does not use is refused
with a message saying what it uses.
"""

from __future__ import annotations

from typing import Annotated

import typer

from stalwart.cli.common import client, fmt_time, out, print_json, table
from stalwart.client.jobs import LimitedJob

__all__ = ["app"]

app = typer.Typer(help="See and reorder the job queue.", no_args_is_help=True)


def _row(job: LimitedJob) -> list[str]:
    name = getattr(job, "name", "")
    if job.type == "TYPE_EXPERIMENT" and name:
        name = f"{name} ({getattr(job, 'entity_id', '')})"
    summary = job.summary
    return [
        str(summary.jobs_ahead) if summary is not None else "",
        job.job_id,
        job.type.removeprefix("TYPE_").lower(),
        name or "(hidden)",
        "" if job.priority is None else str(job.priority),
        "" if job.weight is None else f"{job.weight:g}",
        fmt_time(getattr(job, "submission_time", None), compact=True),
        f"{job.allocated_slots}/{job.requested_slots}",
        summary.state.removeprefix("STATE_") if summary is not None else "",
        getattr(job, "username", ""),
    ]


@app.command("list")
def list_jobs(
    resource_pool: Annotated[
        str | None, typer.Option("--resource-pool", "-p", help="Only this pool's jobs.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the jobs in the order the scheduler takes them."""
    jobs = client().list_jobs(resource_pool)
    if as_json:
        print_json(jobs)
        return
    grid = table(
        "#", "ID", "Type", "Name", "Priority", "Weight", "Submitted", "Slots", "State", "User"
    )
    for job in jobs:
        grid.add_row(*_row(job))
    out().print(grid)


@app.command("update")
def update(
    job_id: Annotated[str, typer.Argument(help="The job id.")],
    priority: Annotated[
        int | None, typer.Option("--priority", "-p", help="A new priority (1 runs first).")
    ] = None,
    weight: Annotated[
        float | None, typer.Option("--weight", "-w", help="A new fair-share weight.")
    ] = None,
    ahead_of: Annotated[
        str | None, typer.Option("--ahead-of", help="Move it ahead of this job.")
    ] = None,
    behind_of: Annotated[
        str | None, typer.Option("--behind-of", help="Move it behind this job.")
    ] = None,
) -> None:
    """Change a job's priority, weight or place in the queue."""
    if all(v is None for v in (priority, weight, ahead_of, behind_of)):
        raise typer.BadParameter("give --priority, --weight, --ahead-of or --behind-of")
    client().update_job(
        job_id, priority=priority, weight=weight, ahead_of=ahead_of, behind_of=behind_of
    )
    out().print(f"Updated job {job_id}.", markup=False)
