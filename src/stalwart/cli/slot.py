"""``stalwart slot list`` and ``stalwart agent list``: the cluster's agents and slots."""

from __future__ import annotations

from typing import Annotated

import typer

from stalwart.cli.common import client, fmt_time, out, print_json, state_text, table

__all__ = ["app", "list_agents", "list_slots"]

app = typer.Typer(help="Inspect the cluster's slots.", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")


def list_agents(as_json: Annotated[bool, _JSON] = False) -> None:
    """List the agents the master knows."""
    agents = client().list_agents()
    if as_json:
        print_json(agents)
        return
    columns = ("Agent", "Registered", "Slots", "Used", "Pool", "Addresses", "Enabled")
    grid = table(*columns, "Version")
    for agent in agents:
        slots = list((agent.slots or {}).values())
        enabled = "draining" if agent.draining else ("yes" if agent.enabled else "no")
        grid.add_row(
            agent.id,
            fmt_time(agent.registered_time, compact=True),
            str(len(slots)),
            str(sum(1 for s in slots if s.container is not None)),
            ", ".join(agent.resource_pools),
            ", ".join(agent.addresses),
            enabled,
            agent.stalwart_version or agent.version,
        )
    out().print(grid)


@app.command("list")
def list_slots(as_json: Annotated[bool, _JSON] = False) -> None:
    """List every slot of every agent, with what runs on it."""
    api = client()
    agents = api.list_agents()
    names = {
        res.container_id: task.name
        for task in api.list_tasks().values()
        for res in task.resources or []
    }
    rows = []
    for agent in agents:
        for slot_id, slot in sorted((agent.slots or {}).items()):
            device = slot.device
            container = slot.container
            rows.append(
                {
                    "agentId": agent.id,
                    "slotId": slot.id or slot_id,
                    "enabled": bool(slot.enabled),
                    "draining": bool(slot.draining),
                    "type": (device.type or "").removeprefix("TYPE_") if device else "",
                    "brand": (device.brand or "") if device else "",
                    "containerId": container.id if container else None,
                    "containerState": container.state if container else None,
                    "task": names.get(container.id, "") if container else "",
                }
            )
    if as_json:
        print_json(rows)
        return
    grid = table("Agent", "Slot", "Enabled", "Type", "Device", "Container", "State", "Task")
    for row in rows:
        state = row["containerState"]
        grid.add_row(
            str(row["agentId"]),
            str(row["slotId"]),
            "draining" if row["draining"] else ("yes" if row["enabled"] else "no"),
            str(row["type"]),
            str(row["brand"]),
            str(row["containerId"] or "free"),
            state_text(str(state)) if state else "",
            str(row["task"]),
        )
    out().print(grid)
