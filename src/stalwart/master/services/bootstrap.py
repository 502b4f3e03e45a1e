"""What every master database holds from its first start: built-in users, workspace/project 1.

Idempotent: running it again changes nothing (existing users keep their passwords).
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from stalwart.master.db.tables import Project, User, Workspace
from stalwart.master.services.passwords import client_hash, hash_password

__all__ = ["BUILTIN_USERS", "bootstrap"]

BUILTIN_USERS = (("admin", True), ("determined", False))


def bootstrap(session: Session, initial_password: str) -> None:
    """Create the built-in users and the "Uncategorized" workspace and project if missing."""
    for username, admin in BUILTIN_USERS:
        if session.scalar(select(User).where(User.username == username)) is None:
            session.add(
                User(
                    username=username,
                    admin=admin,
                    active=True,
                    password_hash=hash_password(client_hash(initial_password)),
                )
            )
    session.flush()
    if session.get(Workspace, 1) is None:
        session.add(Workspace(id=1, name="Uncategorized", immutable=True))
        session.flush()
    if session.get(Project, 1) is None:
        session.add(
            Project(id=1, name="Uncategorized", workspace_id=1, immutable=True, key="P0001")
        )
        session.flush()
    if session.get_bind().dialect.name == "postgresql":
        # Rows inserted with explicit ids do not advance PostgreSQL's sequences: move them past
        # the highest id so that the next workspace or project does not collide with id 1.
        for table in ("workspaces", "projects"):
            session.execute(
                text(
                    f"select setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(select max(id) from {table}))"
                )
            )
    session.commit()
