"""``stalwart workspace`` and ``stalwart project``: organise experiments (Determined's ``det
workspace`` and ``det project``).

Workspaces: ``list``, ``describe``, ``create``, ``edit`` (rename, agent user, checkpoint
storage, default pools), ``archive``/``unarchive``, ``pin``/``unpin``, ``list-projects`` and
``delete`` (refused while it holds experiments). Projects: ``list``, ``describe``, ``create``,
``edit``, ``archive``/``unarchive``, ``notes``, ``add-note`` and ``delete``. Experiments move
with ``stalwart experiment move``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from stalwart.cli.common import client, fmt_time, out, print_json, table
from stalwart.client.workspace import Project, Workspace

__all__ = ["app", "project_app"]

app = typer.Typer(help="Manage workspaces.", no_args_is_help=True)
project_app = typer.Typer(help="Manage projects.", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")
_YES = typer.Option("--yes", "-y", help="Do not ask for confirmation.")


def _settings(
    agent_uid: int | None,
    agent_gid: int | None,
    agent_user: str | None,
    agent_group: str | None,
    checkpoint_storage: str | None,
    compute_pool: str | None,
    aux_pool: str | None,
) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    agent = (agent_uid, agent_gid, agent_user, agent_group)
    if any(v is not None for v in agent):
        settings["agent_user_group"] = {
            "agentUid": agent_uid,
            "agentGid": agent_gid,
            "agentUser": agent_user,
            "agentGroup": agent_group,
        }
    if checkpoint_storage is not None:
        settings["checkpoint_storage_config"] = json.loads(checkpoint_storage)
    if compute_pool is not None:
        settings["default_compute_pool"] = compute_pool
    if aux_pool is not None:
        settings["default_aux_pool"] = aux_pool
    return settings


_UID = typer.Option("--agent-uid", help="Tasks of the workspace run as this uid (admins only).")
_GID = typer.Option("--agent-gid", help="... and this gid.")
_AUSER = typer.Option("--agent-user", help="... user name.")
_AGROUP = typer.Option("--agent-group", help="... group name.")
_STORAGE = typer.Option(
    "--checkpoint-storage", help="Checkpoint storage of its experiments (JSON; '{}' clears)."
)
_COMPUTE = typer.Option("--default-compute-pool", help="Pool of jobs with slots ('' clears).")
_AUX = typer.Option("--default-aux-pool", help="Pool of zero-slot jobs ('' clears).")


def _print_workspaces(workspaces: list[Workspace], as_json: bool) -> None:
    if as_json:
        print_json([w.data.model_dump(mode="json", by_alias=True) for w in workspaces])
        return
    view = table(
        "ID",
        "Name",
        "Projects",
        "Experiments",
        "Pinned",
        "Archived",
        "Agent user",
        "Compute pool",
        "Aux pool",
    )
    for w in workspaces:
        d = w.data
        agent = d.agent_user_group
        view.add_row(
            str(d.id),
            d.name,
            str(d.num_projects),
            str(d.num_experiments),
            "yes" if d.pinned else "",
            "yes" if d.archived else "",
            f"{agent.agent_user} ({agent.agent_uid})" if agent is not None else "",
            d.default_compute_pool or "",
            d.default_aux_pool or "",
        )
    out().print(view)


def _print_projects(projects: list[Project], as_json: bool) -> None:
    if as_json:
        print_json([p.data.model_dump(mode="json", by_alias=True) for p in projects])
        return
    view = table(
        "ID", "Key", "Name", "Description", "Experiments", "Active", "Archived", "Last started"
    )
    for p in projects:
        d = p.data
        view.add_row(
            str(d.id),
            d.key,
            d.name,
            d.description,
            str(d.num_experiments),
            str(d.num_active_experiments),
            "yes" if d.archived else "",
            fmt_time(d.last_experiment_started_at),
        )
    out().print(view)


@app.command("list")
def list_workspaces(as_json: Annotated[bool, _JSON] = False) -> None:
    """The workspaces you may see."""
    _print_workspaces(client().list_workspaces(), as_json)


@app.command("describe")
def describe(name: str, as_json: Annotated[bool, _JSON] = False) -> None:
    """One workspace, with its checkpoint storage."""
    workspace = client().get_workspace(name)
    _print_workspaces([workspace], as_json)
    if not as_json and workspace.data.checkpoint_storage_config:
        storage = json.dumps(workspace.data.checkpoint_storage_config)
        out().print(f"Checkpoint storage: {storage}", markup=False)


@app.command("create")
def create(
    name: str,
    agent_uid: Annotated[int | None, _UID] = None,
    agent_gid: Annotated[int | None, _GID] = None,
    agent_user: Annotated[str | None, _AUSER] = None,
    agent_group: Annotated[str | None, _AGROUP] = None,
    checkpoint_storage: Annotated[str | None, _STORAGE] = None,
    compute_pool: Annotated[str | None, _COMPUTE] = None,
    aux_pool: Annotated[str | None, _AUX] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Create a workspace; you become its admin."""
    settings = _settings(
        agent_uid, agent_gid, agent_user, agent_group, checkpoint_storage, compute_pool, aux_pool
    )
    _print_workspaces([client().create_workspace(name, **settings)], as_json)


@app.command("edit")
def edit(
    name: str,
    new_name: Annotated[str | None, typer.Option("--name", help="A new name.")] = None,
    agent_uid: Annotated[int | None, _UID] = None,
    agent_gid: Annotated[int | None, _GID] = None,
    agent_user: Annotated[str | None, _AUSER] = None,
    agent_group: Annotated[str | None, _AGROUP] = None,
    checkpoint_storage: Annotated[str | None, _STORAGE] = None,
    compute_pool: Annotated[str | None, _COMPUTE] = None,
    aux_pool: Annotated[str | None, _AUX] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Rename a workspace or change its settings (its admins)."""
    settings = _settings(
        agent_uid, agent_gid, agent_user, agent_group, checkpoint_storage, compute_pool, aux_pool
    )
    if new_name is not None:
        settings["name"] = new_name
    _print_workspaces([client().get_workspace(name).edit(**settings)], as_json)


def _act(name: str, action: str, done: str) -> None:
    workspace = client().get_workspace(name)
    getattr(workspace, action)()
    out().print(f"{done} workspace {workspace.name}.", markup=False)


@app.command("archive")
def archive(name: str) -> None:
    """Archive a workspace (it takes no new projects or experiments)."""
    _act(name, "archive", "Archived")


@app.command("unarchive")
def unarchive(name: str) -> None:
    """Unarchive a workspace."""
    _act(name, "unarchive", "Unarchived")


@app.command("pin")
def pin(name: str) -> None:
    """Pin a workspace (for you)."""
    _act(name, "pin", "Pinned")


@app.command("unpin")
def unpin(name: str) -> None:
    """Unpin a workspace."""
    _act(name, "unpin", "Unpinned")


@app.command("delete")
def delete(name: str, yes: Annotated[bool, _YES] = False) -> None:
    """Delete an empty workspace and its empty projects."""
    if not yes:
        typer.confirm(f"Delete workspace {name}?", abort=True)
    _act(name, "delete", "Deleted")


@app.command("list-projects")
def list_projects(name: str, as_json: Annotated[bool, _JSON] = False) -> None:
    """The projects of a workspace."""
    _print_projects(client().get_workspace(name).list_projects(), as_json)


@project_app.command("list")
def project_list(workspace: str, as_json: Annotated[bool, _JSON] = False) -> None:
    """The projects of a workspace."""
    _print_projects(client().get_workspace(workspace).list_projects(), as_json)


@project_app.command("describe")
def project_describe(workspace: str, name: str, as_json: Annotated[bool, _JSON] = False) -> None:
    """One project, with its notes."""
    project = client().get_workspace(workspace).get_project(name)
    _print_projects([project], as_json)
    if not as_json:
        for note in project.data.notes:
            out().print(f"\n# {note.name}\n{note.contents}", markup=False)


@project_app.command("create")
def project_create(
    workspace: str,
    name: str,
    description: Annotated[str | None, typer.Option("--description")] = None,
    key: Annotated[str | None, typer.Option("--key", help="1-5 letters or digits.")] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Create a project in a workspace."""
    project = (
        client().get_workspace(workspace).create_project(name, description=description, key=key)
    )
    _print_projects([project], as_json)


@project_app.command("edit")
def project_edit(
    workspace: str,
    name: str,
    new_name: Annotated[str | None, typer.Option("--name", help="A new name.")] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    key: Annotated[str | None, typer.Option("--key")] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Rename, describe or re-key a project."""
    project = client().get_workspace(workspace).get_project(name)
    _print_projects([project.edit(name=new_name, description=description, key=key)], as_json)


def _project_act(workspace: str, name: str, action: str, done: str) -> None:
    project = client().get_workspace(workspace).get_project(name)
    getattr(project, action)()
    out().print(f"{done} project {project.name}.", markup=False)


@project_app.command("archive")
def project_archive(workspace: str, name: str) -> None:
    """Archive a project (it takes no new experiments)."""
    _project_act(workspace, name, "archive", "Archived")


@project_app.command("unarchive")
def project_unarchive(workspace: str, name: str) -> None:
    """Unarchive a project."""
    _project_act(workspace, name, "unarchive", "Unarchived")


@project_app.command("add-note")
def project_add_note(workspace: str, name: str, title: str, contents: str) -> None:
    """Add a note to a project."""
    project = client().get_workspace(workspace).get_project(name)
    notes = project.add_note(title, contents)
    out().print(f"Project {project.name} has {len(notes)} note(s).", markup=False)


@project_app.command("delete")
def project_delete(workspace: str, name: str, yes: Annotated[bool, _YES] = False) -> None:
    """Delete a project that holds no experiment."""
    if not yes:
        typer.confirm(f"Delete project {name}?", abort=True)
    _project_act(workspace, name, "delete", "Deleted")
