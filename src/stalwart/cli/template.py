"""``stalwart template``: config templates shared by experiments and tasks.

``set NAME FILE [-w WORKSPACE_ID]`` creates the template (in workspace 1 unless told) or
replaces its settings; ``list [-d]`` shows those you may read (``-d``: with their settings);
``describe NAME`` prints one as YAML; ``remove NAME`` deletes it. Use one with ``--template NAME``
on ``stalwart experiment create``, ``cmd run``, ``notebook start``, ``shell start`` and
``tensorboard start``: its settings go under your config (yours win). Reading needs a viewer
role in the template's workspace, changing an editor role.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from stalwart.cli.common import client, out, print_json, table

__all__ = ["app"]

app = typer.Typer(help="Manage config templates.", no_args_is_help=True)

_NAME = typer.Argument(help="The template's name.")


def _yaml(data: object) -> str:
    return yaml.safe_dump(data, default_flow_style=False, sort_keys=False)


@app.command("list")
def list_templates(
    details: Annotated[
        bool, typer.Option("--details", "-d", help="Show each template's settings.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the templates you may read."""
    found = client().list_templates()
    if as_json:
        print_json(found)
        return
    columns = ("Name", "Workspace", "Settings") if details else ("Name", "Workspace")
    grid = table(*columns)
    for tpl in found:
        row = [tpl.name, str(tpl.workspace_id)]
        if details:
            row.append(_yaml(tpl.config).rstrip())
        grid.add_row(*row)
    out().print(grid)


@app.command("describe")
def describe(name: Annotated[str, _NAME]) -> None:
    """Print a template's settings as YAML."""
    out().print(_yaml(client().get_template(name).config).rstrip(), markup=False)


@app.command("set")
def set_template(
    name: Annotated[str, _NAME],
    file: Annotated[Path, typer.Argument(help="The template's settings (YAML).")],
    workspace: Annotated[
        int | None,
        typer.Option("--workspace", "-w", help="The workspace id of a new template (default 1)."),
    ] = None,
) -> None:
    """Create a template, or replace the settings of an existing one."""
    client().set_template(name, file, workspace_id=workspace)
    out().print(f"Set template {name}.", markup=False)


@app.command("remove")
def remove(name: Annotated[str, _NAME]) -> None:
    """Remove a template (what was made with it keeps its config)."""
    client().remove_template(name)
    out().print(f"Removed template {name}.", markup=False)
