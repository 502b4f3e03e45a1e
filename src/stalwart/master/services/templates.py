"""Config templates (``det template``): named, partial configs kept in a workspace.

A template holds settings shared by many experiments or tasks (a checkpoint storage, an image,
bind mounts, resources...). ``--template NAME`` merges its config *under* the user's config
(:func:`stalwart.config.merge.merge_layers`: what the user sets wins), before the resource
pool's and the master's defaults.

Contracts (Determined's ``TemplateAPIServer``, with Stalwart's workspace roles,
:mod:`stalwart.master.policy`):

- Names are unique across the cluster. A template belongs to one workspace (default: 1,
  ``Uncategorized``); its config is any mapping, stored as given (it is validated with the
  config it is merged into, where every problem is reported).
- Reading (list, describe, use with ``--template``) needs a **viewer** role or more in the
  template's workspace. A template the caller may not read is "not found" (404), exactly like
  one that does not exist, so names in other workspaces are not disclosed.
- Creating, changing and removing a template needs an **editor** role or more in its
  workspace (Determined's RBAC gives the template permissions to its Editor role and up, and
  only viewing to Viewer); a cluster admin may do everything.
- Functions add, change or delete rows and flush; the caller commits.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from stalwart.errors import AlreadyExistsError, ForbiddenError, InvalidArgumentError, NotFoundError
from stalwart.master import policy
from stalwart.master.db.tables import Template, User, Workspace, utcnow

__all__ = [
    "DEFAULT_WORKSPACE_ID",
    "create_template",
    "delete_template",
    "get_template",
    "list_templates",
    "put_template",
    "rename_template",
    "template_config",
    "update_template_config",
]

DEFAULT_WORKSPACE_ID = 1
"""Where a template goes when no workspace is named (``workspaceId`` 0 or absent)."""


def _not_found(name: str) -> NotFoundError:
    return NotFoundError(f"template '{name}' not found")


def _check_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise InvalidArgumentError("a template needs a name")
    if len(name) > 255:
        raise InvalidArgumentError("a template name has at most 255 characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidArgumentError("a template name cannot hold control characters")
    return name


def _check_config(config: Any) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        what = "nothing" if config is None else type(config).__name__
        raise InvalidArgumentError(
            f"a template's config must be a mapping of settings (got {what})",
            hint="write the template as YAML keys and values, like an experiment config",
        )
    return copy.deepcopy(dict(config))


def _may_read(session: Session, user: User, template: Template) -> bool:
    return policy.workspace_role(session, user, template.workspace_id) >= policy.Role.VIEWER


def _require_write(session: Session, user: User, workspace_id: int, name: str) -> None:
    role = policy.workspace_role(session, user, workspace_id)
    if role >= policy.Role.EDITOR:
        return
    workspace = session.get(Workspace, workspace_id)
    label = workspace.name if workspace is not None else str(workspace_id)
    raise ForbiddenError(
        f"user {user.username} cannot change template '{name}' in workspace '{label}': their "
        f"role there is {role.label}, and changing templates needs an editor role or more",
        hint="ask an admin of the workspace for an editor role",
    )


def _find(session: Session, user: User, name: str) -> Template:
    template = session.get(Template, name)
    if template is None or not _may_read(session, user, template):
        raise _not_found(name)
    return template


def list_templates(
    session: Session,
    user: User,
    *,
    name: str | None = None,
    workspace_ids: Iterable[int] = (),
    descending: bool = False,
) -> list[Template]:
    """The templates the caller may read, by name (``name``: a case-insensitive substring;
    ``workspace_ids``: only those workspaces)."""
    query = select(Template).order_by(Template.name.desc() if descending else Template.name)
    wanted = sorted(set(workspace_ids))
    if wanted:
        query = query.where(Template.workspace_id.in_(wanted))
    roles: dict[int, bool] = {}
    found: list[Template] = []
    needle = (name or "").lower()
    for template in session.scalars(query):
        if needle and needle not in template.name.lower():
            continue
        if template.workspace_id not in roles:
            roles[template.workspace_id] = _may_read(session, user, template)
        if roles[template.workspace_id]:
            found.append(template)
    return found


def get_template(session: Session, user: User, name: str) -> Template:
    """One template the caller may read; NotFoundError otherwise."""
    return _find(session, user, _check_name(name))


def template_config(session: Session, user: User, name: str) -> dict[str, Any]:
    """The config of template ``name`` for ``--template`` (a copy; NotFoundError when there is
    none the caller may read)."""
    return copy.deepcopy(dict(get_template(session, user, name).config))


def create_template(
    session: Session,
    user: User,
    name: str,
    config: Any,
    workspace_id: int | None = None,
) -> Template:
    """A new template in ``workspace_id`` (0 or None: workspace 1); AlreadyExistsError when
    the name is taken, NotFoundError for a workspace the caller cannot see."""
    name = _check_name(name)
    data = _check_config(config)
    workspace_id = workspace_id or DEFAULT_WORKSPACE_ID
    workspace = session.get(Workspace, workspace_id)
    if workspace is None or policy.workspace_role(session, user, workspace_id) < (
        policy.Role.VIEWER
    ):
        raise NotFoundError(f"workspace {workspace_id} not found")
    if workspace.archived:
        raise InvalidArgumentError(
            f"workspace '{workspace.name}' is archived: templates cannot be added to it"
        )
    _require_write(session, user, workspace_id, name)
    if session.get(Template, name) is not None:
        raise AlreadyExistsError(
            f"a template named '{name}' already exists",
            hint="change its settings with `template set NAME FILE`, or choose another name",
        )
    now = utcnow()
    template = Template(
        name=name, config=data, workspace_id=workspace_id, created_at=now, updated_at=now
    )
    session.add(template)
    session.flush()
    return template


def update_template_config(session: Session, user: User, name: str, config: Any) -> Template:
    """Replace the config of template ``name`` (a full update, as Determined's PATCH)."""
    template = _find(session, user, _check_name(name))
    data = _check_config(config)
    _require_write(session, user, template.workspace_id, template.name)
    template.config = data
    template.updated_at = utcnow()
    session.flush()
    return template


def put_template(
    session: Session, user: User, name: str, config: Any, workspace_id: int | None = None
) -> Template:
    """Create template ``name`` in workspace 1, or replace its config (an upsert). As in
    Determined, an upsert cannot choose a workspace."""
    if workspace_id:
        raise InvalidArgumentError(
            "setting workspace_id is not supported when upserting a template",
            hint="create it in a workspace with `det template create NAME FILE -w WORKSPACE`",
        )
    name = _check_name(name)
    if session.get(Template, name) is None:
        return create_template(session, user, name, config)
    return update_template_config(session, user, name, config)


def rename_template(session: Session, user: User, old: str, new: str) -> Template:
    """Give template ``old`` the name ``new`` (AlreadyExistsError when it is taken)."""
    template = _find(session, user, _check_name(old))
    new = _check_name(new)
    _require_write(session, user, template.workspace_id, template.name)
    if new == template.name:
        return template
    if session.get(Template, new) is not None:
        raise AlreadyExistsError(f"a template named '{new}' already exists")
    template.name = new
    template.updated_at = utcnow()
    session.flush()
    return template


def delete_template(session: Session, user: User, name: str) -> None:
    """Remove template ``name``. Experiments and tasks made with it keep their merged
    configs."""
    template = _find(session, user, _check_name(name))
    _require_write(session, user, template.workspace_id, template.name)
    session.delete(template)
    session.flush()
