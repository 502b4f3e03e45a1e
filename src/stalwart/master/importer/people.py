"""Users, workspaces and projects.

A Stalwart user, workspace or project with the same name (``admin``, ``determined``,
"Uncategorized", or one made by hand before the import) stands for Determined's: it is mapped,
not duplicated, and keeps its own settings and password. Imported users keep Determined's
password hash (bcrypt), which login verifies and replaces with Stalwart's own on the first
success (:mod:`stalwart.master.services.passwords`).
"""

from __future__ import annotations

from sqlalchemy import select

from stalwart.master.db.tables import Project, User, Workspace, WorkspaceRole, utcnow
from stalwart.master.importer.context import Context, aware
from stalwart.master.services.projects import generated_key

__all__ = ["import_projects", "import_users", "import_workspaces"]


def import_users(ctx: Context) -> None:
    """Every Determined user (the ``--workspace`` filter does not apply to people)."""
    for row in ctx.source.users():
        if ctx.ids.get("user", row["id"]) is not None:
            ctx.report.count("user", "present")
            continue
        existing = ctx.session.scalar(select(User.id).where(User.username == row["username"]))
        if existing is not None:
            ctx.ids.record("user", row["id"], existing)
            ctx.report.count("user", "matched")
            continue
        remote = bool(row["remote"])
        ctx.add(
            "user",
            User(
                username=row["username"],
                display_name=row["display_name"],
                password_hash=None if remote else row["password_hash"],
                admin=bool(row["admin"]),
                active=bool(row["active"]),
                remote=remote,
                modified_at=aware(row["modified_at"]) or utcnow(),
                last_auth_at=aware(row["last_auth_at"]),
            ),
            row["id"],
        )
    ctx.commit()


def import_workspaces(ctx: Context) -> None:
    """The selected workspaces; the owner of an imported one is its admin, as when a
    workspace is created here."""
    for row in ctx.source.workspaces():
        if row["id"] not in ctx.workspaces:
            continue
        if ctx.ids.get("workspace", row["id"]) is not None:
            ctx.report.count("workspace", "present")
            continue
        existing = ctx.session.scalar(select(Workspace.id).where(Workspace.name == row["name"]))
        if existing is not None:
            ctx.ids.record("workspace", row["id"], existing)
            ctx.report.count("workspace", "matched")
            continue
        owner = ctx.user_id(row["user_id"])
        new_id = ctx.add(
            "workspace",
            Workspace(
                name=row["name"],
                archived=bool(row["archived"]),
                user_id=owner,
                agent_uid=row["uid"],
                agent_gid=row["gid"],
                agent_user=row["user_"],
                agent_group=row["group_"],
                checkpoint_storage=row["checkpoint_storage_config"],
                default_compute_pool=row["default_compute_pool"],
                default_aux_pool=row["default_aux_pool"],
            ),
            row["id"],
        )
        if owner is not None:
            ctx.session.add(WorkspaceRole(workspace_id=new_id, user_id=owner, role="admin"))
    ctx.commit()


def import_projects(ctx: Context) -> None:
    """The selected workspaces' projects; a key taken here is replaced by a generated one."""
    for row in ctx.source.projects():
        if row["workspace_id"] not in ctx.workspaces:
            continue
        if ctx.ids.get("project", row["id"]) is not None:
            ctx.report.count("project", "present")
            continue
        workspace = ctx.workspace_id(row["workspace_id"])
        if workspace is None:
            ctx.report.skip("project", row["id"], "its workspace was not imported")
            continue
        existing = ctx.session.scalar(
            select(Project.id).where(Project.workspace_id == workspace, Project.name == row["name"])
        )
        if existing is not None:
            ctx.ids.record("project", row["id"], existing)
            ctx.report.count("project", "matched")
            continue
        key = (row["key"] or "").upper() or None
        if key is None or ctx.session.scalar(select(Project.id).where(Project.key == key)):
            key = generated_key(ctx.session, row["name"])
        ctx.add(
            "project",
            Project(
                name=row["name"],
                description=row["description"] or "",
                workspace_id=workspace,
                archived=bool(row["archived"]),
                user_id=ctx.user_id(row["user_id"]),
                key=key,
                notes=list(row["notes"] or []),
                created_at=aware(row["created_at"]),
            ),
            row["id"],
        )
    ctx.commit()
