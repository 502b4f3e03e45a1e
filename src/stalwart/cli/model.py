"""``stalwart model``: the model registry (models, and versions that are registered checkpoints).

A model is named by its name or id. A registered checkpoint is kept: checkpoint GC leaves it
alone and deleting it is refused until its versions are deleted.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from stalwart.cli.common import client, fmt_mapping, fmt_time, out, print_json, table
from stalwart.client import Model, ModelVersion
from stalwart.errors import InvalidArgumentError

__all__ = ["app"]

app = typer.Typer(help="The model registry: models and their versions.", no_args_is_help=True)

_MODEL = typer.Argument(help="The model's name or id.")
_JSON = typer.Option("--json", help="Print JSON.")


def _metadata(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"--metadata is not JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise InvalidArgumentError("--metadata must be a JSON object")
    return value


def _show_model(model: Model) -> None:
    console = out()
    for line in (
        f"Model {model.name} (id {model.id})",
        f"Description: {model.description}",
        f"Workspace: {model.workspace_id}  Archived: {'yes' if model.archived else 'no'}",
        f"Created: {fmt_time(model.data.creation_time)} by {model.data.username}",
        f"Updated: {fmt_time(model.data.last_updated_time)}",
        f"Labels: {', '.join(model.labels)}",
        f"Metadata: {fmt_mapping(model.metadata)}",
        f"Versions: {model.num_versions}",
    ):
        console.print(line, markup=False)


def _show_versions(versions: list[ModelVersion]) -> None:
    grid = table("Version", "Name", "Checkpoint", "Trial", "Batches", "Registered")
    for version in versions:
        ckpt = version.checkpoint
        batches = ckpt.steps_completed
        grid.add_row(
            str(version.number),
            version.name,
            ckpt.uuid,
            str(ckpt.trial_id or ""),
            str(batches if batches is not None else ""),
            fmt_time(version.data.creation_time),
        )
    out().print(grid)


@app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="A unique name (not only digits).")],
    description: Annotated[str, typer.Option(help="What the model is.")] = "",
    workspace: Annotated[
        str | None, typer.Option("--workspace", "-w", help="Its workspace (default Uncategorized).")
    ] = None,
    labels: Annotated[list[str] | None, typer.Option("--label", help="A label (repeat).")] = None,
    metadata: Annotated[str | None, typer.Option(help="Metadata as a JSON object.")] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Create a model."""
    model = client().create_model(
        name,
        description=description,
        workspace=workspace,
        labels=labels or [],
        metadata=_metadata(metadata),
    )
    if as_json:
        print_json(model.data)
    else:
        _show_model(model)


@app.command("list")
def list_models(
    name: Annotated[str | None, typer.Option(help="Only names containing this.")] = None,
    workspace: Annotated[
        list[str] | None, typer.Option("--workspace", "-w", help="Only in this workspace.")
    ] = None,
    label: Annotated[list[str] | None, typer.Option(help="Only with this label.")] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """List the models you may see, by name."""
    models = client().list_models(name=name, workspaces=workspace, labels=label or [])
    if as_json:
        print_json([m.data for m in models])
        return
    grid = table("ID", "Name", "Workspace", "Versions", "Labels", "Updated")
    for m in models:
        grid.add_row(
            str(m.id),
            m.name,
            str(m.workspace_id),
            str(m.num_versions),
            ", ".join(m.labels),
            fmt_time(m.data.last_updated_time),
        )
    out().print(grid)


@app.command("describe")
def describe(model: Annotated[str, _MODEL], as_json: Annotated[bool, _JSON] = False) -> None:
    """Show a model and its versions."""
    found = client().get_model(model)
    versions = found.get_versions()
    if as_json:
        print_json({"model": found.data, "versions": [v.data for v in versions]})
        return
    _show_model(found)
    if versions:
        _show_versions(versions)


@app.command("register-version")
def register_version(
    model: Annotated[str, _MODEL],
    checkpoint: Annotated[str, typer.Argument(help="The UUID of a COMPLETED checkpoint.")],
    name: Annotated[str | None, typer.Option(help="A name for the version.")] = None,
    notes: Annotated[str | None, typer.Option(help="Notes for the version.")] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Register a checkpoint as the model's next version (GC then keeps it)."""
    version = client().get_model(model).register_version(checkpoint, name=name, notes=notes)
    if as_json:
        print_json(version.data)
        return
    out().print(
        f"Registered checkpoint {checkpoint} as version {version.number} of {version.model_name}",
        markup=False,
    )


@app.command("set")
def set_fields(
    model: Annotated[str, _MODEL],
    name: Annotated[str | None, typer.Option(help="A new name.")] = None,
    description: Annotated[str | None, typer.Option(help="A new description.")] = None,
    notes: Annotated[str | None, typer.Option(help="New notes.")] = None,
    labels: Annotated[
        list[str] | None, typer.Option("--label", help="Replace the labels (repeat).")
    ] = None,
    metadata: Annotated[str | None, typer.Option(help="Replace the metadata (JSON).")] = None,
) -> None:
    """Change a model's name, description, notes, labels or metadata."""
    if all(v is None for v in (name, description, notes, labels, metadata)):
        raise InvalidArgumentError("nothing to change: give --name, --description, --notes...")
    found = client().get_model(model)
    found.update(
        name=name,
        description=description,
        notes=notes,
        labels=labels,
        metadata=_metadata(metadata),
    )
    _show_model(found)


@app.command("move")
def move(
    model: Annotated[str, _MODEL],
    workspace: Annotated[str, typer.Option("--workspace", "-w", help="The new workspace.")],
) -> None:
    """Move a model (with its versions) to another workspace."""
    found = client().get_model(model).move_to_workspace(workspace)
    out().print(f"Moved model {found.name} to workspace {workspace}", markup=False)


@app.command("archive")
def archive(model: Annotated[str, _MODEL]) -> None:
    """Archive a model: no changes or new versions until it is unarchived."""
    found = client().get_model(model).archive()
    out().print(f"Archived model {found.name}", markup=False)


@app.command("unarchive")
def unarchive(model: Annotated[str, _MODEL]) -> None:
    """Unarchive a model."""
    found = client().get_model(model).unarchive()
    out().print(f"Unarchived model {found.name}", markup=False)


@app.command("delete-version")
def delete_version(
    model: Annotated[str, _MODEL],
    version: Annotated[int, typer.Argument(help="The version number.")],
) -> None:
    """Delete a version (its checkpoint is then no longer kept for it)."""
    found = client().get_model(model).get_version(version)
    assert found is not None
    found.delete()
    out().print(f"Deleted version {version} of model {found.model_name}", markup=False)


@app.command("delete")
def delete(model: Annotated[str, _MODEL]) -> None:
    """Delete a model and all its versions."""
    found = client().get_model(model)
    found.delete()
    out().print(f"Deleted model {found.name}", markup=False)
