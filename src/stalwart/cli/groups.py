"""``stalwart user-group``: user groups and the workspace roles given to them (Determined's
``det user-group``, plus roles).

``list [--member USER]``, ``describe GROUP`` (anyone); ``create GROUP [--add-user USER]...``,
``add-user GROUP USER...``, ``remove-user GROUP USER...``, ``rename GROUP NEW``, ``delete GROUP``
(cluster admins); ``set-role GROUP WORKSPACE ROLE`` and ``remove-role GROUP WORKSPACE``
(admins of the workspace). A user's role in a workspace is the highest of their own, their
groups' and the workspace's default (docs/security.md).
"""

from __future__ import annotations

from typing import Annotated

import typer

from stalwart.cli.common import client, fmt_time, out, print_json, table

__all__ = ["app"]

app = typer.Typer(help="Manage user groups and the roles given to them.", no_args_is_help=True)

_JSON = typer.Option("--json", help="Print JSON.")
_GROUP = typer.Argument(help="The group's name.")


@app.command("list")
def list_groups(
    member: Annotated[
        str | None, typer.Option("--member", help="Only groups this user is in.")
    ] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """List user groups and how many members each has."""
    groups = client().groups.list(member=member)
    if as_json:
        print_json(groups)
        return
    grid = table("ID", "Name", "Members")
    for found in groups:
        grid.add_row(str(found.group.group_id), found.group.name, str(found.num_members))
    out().print(grid)


@app.command("describe")
def describe(group: Annotated[str, _GROUP], as_json: Annotated[bool, _JSON] = False) -> None:
    """Show a group's members."""
    details = client().groups.get(group)
    if as_json:
        print_json(details)
        return
    grid = table("ID", "Username", "Display name", "Last login", title=details.name)
    for user in details.users:
        grid.add_row(
            str(user.id or ""),
            user.username,
            user.display_name or "",
            fmt_time(user.last_auth_at, compact=True),
        )
    out().print(grid)


@app.command("create")
def create(
    group: Annotated[str, _GROUP],
    add_user: Annotated[
        list[str] | None, typer.Option("--add-user", help="A first member (repeatable).")
    ] = None,
) -> None:
    """Create a user group (cluster admins)."""
    made = client().groups.create(group, add_user or [])
    members = f" with {', '.join(u.username for u in made.users)}" if made.users else ""
    out().print(f"Created user group {made.name} (ID {made.group_id}){members}.", markup=False)


@app.command("add-user")
def add_user(
    group: Annotated[str, _GROUP],
    usernames: Annotated[list[str], typer.Argument(help="The users to add.")],
) -> None:
    """Add users to a group (cluster admins)."""
    changed = client().groups.add_members(group, usernames)
    out().print(f"Added {', '.join(usernames)} to user group {changed.name}.", markup=False)


@app.command("remove-user")
def remove_user(
    group: Annotated[str, _GROUP],
    usernames: Annotated[list[str], typer.Argument(help="The users to remove.")],
) -> None:
    """Take users out of a group (cluster admins)."""
    changed = client().groups.remove_members(group, usernames)
    out().print(f"Removed {', '.join(usernames)} from user group {changed.name}.", markup=False)


@app.command("rename")
def rename(
    group: Annotated[str, _GROUP],
    new_name: Annotated[str, typer.Argument(help="Its new name.")],
) -> None:
    """Rename a group (cluster admins)."""
    client().groups.rename(group, new_name)
    out().print(f"Renamed user group {group} to {new_name}.", markup=False)


@app.command("delete")
def delete(group: Annotated[str, _GROUP]) -> None:
    """Delete a group: its members lose the roles given to it (cluster admins)."""
    client().groups.delete(group)
    out().print(f"Deleted user group {group}.", markup=False)


@app.command("set-role")
def set_role(
    group: Annotated[str, _GROUP],
    workspace: Annotated[str, typer.Argument(help="The workspace's name.")],
    role: Annotated[str, typer.Argument(help="viewer, member, editor or admin.")],
) -> None:
    """Give a group a role in a workspace (admins of the workspace)."""
    client().groups.set_role(group, workspace, role)
    out().print(f"User group {group} has role {role} in workspace {workspace}.", markup=False)


@app.command("remove-role")
def remove_role(
    group: Annotated[str, _GROUP],
    workspace: Annotated[str, typer.Argument(help="The workspace's name.")],
) -> None:
    """Take away the role given to a group in a workspace (admins of the workspace)."""
    client().groups.remove_role(group, workspace)
    out().print(f"User group {group} has no role in workspace {workspace} now.", markup=False)
