"""``stalwart webhook``: create, list, test and delete webhooks (docs/webhooks.md).

``create URL --state COMPLETED --log-regex 'OOM' [--slack] [--workspace-id N] [--specific]
[--name NAME]``; ``list [--json]``; ``test ID``; ``delete ID``; ``deliveries ID [--json]``
(the latest events and how their delivery went).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from stalwart.cli.common import client, fmt_time, out, print_json, table

__all__ = ["app"]

app = typer.Typer(help="Post experiment and log events to other systems.", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")


@app.command("create")
def create(
    url: Annotated[str, typer.Argument(help="Where events are posted (http or https).")],
    states: Annotated[
        list[str] | None,
        typer.Option(
            "--state", help="Fire when an experiment reaches this state (COMPLETED, ERROR...)."
        ),
    ] = None,
    regexes: Annotated[
        list[str] | None,
        typer.Option("--log-regex", help="Fire on a task's first log line matching this."),
    ] = None,
    name: Annotated[str, typer.Option(help="Its name (experiments name SPECIFIC ones).")] = "",
    slack: Annotated[bool, typer.Option("--slack", help="Post Slack messages.")] = False,
    workspace_id: Annotated[
        int | None, typer.Option(help="Serve only this workspace (default: global, admins).")
    ] = None,
    specific: Annotated[
        bool,
        typer.Option(
            "--specific",
            help="Fire only for experiments that name it (integrations.webhooks in their config).",
        ),
    ] = False,
) -> None:
    """Create a webhook."""
    made = client().create_webhook(
        url,
        name=name,
        slack=slack,
        workspace_id=workspace_id,
        specific=specific,
        states=states or (),
        log_regexes=regexes or (),
    )
    out().print(f"Created webhook {made.id}", markup=False)


@app.command("list")
def list_webhooks(as_json: Annotated[bool, _JSON] = False) -> None:
    """List the webhooks you may manage."""
    found = client().list_webhooks()
    if as_json:
        print_json([dataclasses.asdict(hook) for hook in found])
        return
    grid = table("ID", "Name", "Type", "Mode", "Workspace", "Triggers", "URL")
    for hook in found:
        grid.add_row(
            str(hook.id),
            hook.name,
            hook.webhook_type,
            hook.mode,
            str(hook.workspace_id) if hook.workspace_id is not None else "global",
            ", ".join(f"{t.trigger_type} {t.condition}" for t in hook.triggers),
            hook.url,
        )
    out().print(grid)


@app.command("test")
def test(webhook_id: Annotated[int, typer.Argument(help="The webhook.")]) -> None:
    """Post a test event to the webhook now."""
    client().test_webhook(webhook_id)
    out().print(f"Webhook {webhook_id} took the test event", markup=False)


@app.command("delete")
def delete(webhook_id: Annotated[int, typer.Argument(help="The webhook.")]) -> None:
    """Delete a webhook (its undelivered events are dropped)."""
    client().delete_webhook(webhook_id)
    out().print(f"Deleted webhook {webhook_id}", markup=False)


@app.command("deliveries")
def deliveries(
    webhook_id: Annotated[int, typer.Argument(help="The webhook.")],
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """The webhook's latest events and how their delivery went."""
    found = client().webhook_deliveries(webhook_id, limit=limit)
    if as_json:
        print_json(found)
        return
    grid = table("ID", "Event", "State", "Attempts", "Created", "Finished", "Last error")
    for row in found:
        grid.add_row(
            str(row.id),
            row.event_type,
            row.state,
            str(row.attempts),
            fmt_time(row.created_at, compact=True),
            fmt_time(row.finished_at, compact=True),
            row.last_error or "",
        )
    out().print(grid)
