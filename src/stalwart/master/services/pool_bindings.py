"""Resource pools bound to workspaces.

A pool bound to one or more workspaces serves only the experiments and tasks of those
workspaces; a pool without bindings serves everyone. :func:`require_pool_usable` is the check,
called where experiments (:mod:`~stalwart.master.services.experiment_create`) and interactive
tasks (:mod:`~stalwart.master.services.interactive`) are created; what is already queued or
running keeps its pool when bindings change (as in Determined).

Changing bindings is for cluster admins (the routes check), on pools the master knows and that
are not a default pool (the routes check that too: which pools exist is the resource manager's
business). Workspaces are named by id or name; unknown ones are 404 and archived ones cannot be
bound. Adding a binding that exists and removing one that does not are no-ops. Every change
commits.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from stalwart.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import PoolBinding, Workspace

__all__ = [
    "bind",
    "bound_pools",
    "bound_workspaces",
    "pool_usable",
    "replace",
    "require_pool_usable",
    "resolve_workspaces",
    "unbind",
]


def bound_workspaces(session: Session, pool: str) -> list[int]:
    """The ids of the workspaces ``pool`` is bound to (empty: it serves everyone)."""
    return list(
        session.scalars(
            select(PoolBinding.workspace_id)
            .where(PoolBinding.pool_name == pool)
            .order_by(PoolBinding.workspace_id)
        )
    )


def bound_pools(session: Session) -> set[str]:
    """The names of the pools bound to any workspace."""
    return set(session.scalars(select(PoolBinding.pool_name).distinct()))


def resolve_workspaces(
    session: Session, ids: Sequence[int] = (), names: Sequence[str] = ()
) -> list[Workspace]:
    """The workspaces named by id and by name, in order, each once (404 for unknown ones)."""
    found: dict[int, Workspace] = {}
    for workspace_id in ids:
        workspace = session.get(Workspace, workspace_id)
        if workspace is None:
            raise NotFoundError(f"workspace {workspace_id} not found")
        found[workspace.id] = workspace
    for name in names:
        workspace = session.scalar(select(Workspace).where(Workspace.name == name))
        if workspace is None:
            raise NotFoundError(f"workspace '{name}' not found")
        found[workspace.id] = workspace
    if not found:
        raise InvalidArgumentError("name at least one workspace")
    return list(found.values())


def _check_bindable(pool: str, workspaces: Sequence[Workspace]) -> None:
    archived = [w.name for w in workspaces if w.archived]
    if archived:
        raise FailedPreconditionError(
            f"resource pool '{pool}' cannot be bound to archived workspace "
            f"'{', '.join(archived)}' (unarchive it first)"
        )


def bind(session: Session, pool: str, workspaces: Sequence[Workspace]) -> None:
    """Bind ``pool`` to ``workspaces`` too (existing bindings stay)."""
    _check_bindable(pool, workspaces)
    have = set(bound_workspaces(session, pool))
    session.add_all(
        PoolBinding(pool_name=pool, workspace_id=w.id) for w in workspaces if w.id not in have
    )
    session.commit()


def unbind(session: Session, pool: str, workspaces: Sequence[Workspace]) -> None:
    """Unbind ``pool`` from ``workspaces`` (a pool left without bindings serves everyone)."""
    session.execute(
        delete(PoolBinding).where(
            PoolBinding.pool_name == pool,
            PoolBinding.workspace_id.in_([w.id for w in workspaces]),
        )
    )
    session.commit()


def replace(session: Session, pool: str, workspaces: Sequence[Workspace]) -> None:
    """Bind ``pool`` to exactly ``workspaces``."""
    _check_bindable(pool, workspaces)
    session.execute(delete(PoolBinding).where(PoolBinding.pool_name == pool))
    session.add_all(PoolBinding(pool_name=pool, workspace_id=w.id) for w in workspaces)
    session.commit()


def pool_usable(session: Session, pool: str, workspace_id: int) -> bool:
    """Whether workspace ``workspace_id`` may use ``pool``: it is unbound or bound to it."""
    bound = bound_workspaces(session, pool)
    return not bound or workspace_id in bound


def require_pool_usable(session: Session, pool: str, workspace_id: int, what: str) -> None:
    """InvalidArgumentError unless ``what`` (``"experiment"``, ``"command"``...) of workspace
    ``workspace_id`` may use resource pool ``pool``: the pool is unbound or bound to it."""
    bound = bound_workspaces(session, pool)
    if not bound or workspace_id in bound:
        return
    names = list(
        session.scalars(
            select(Workspace.name).where(Workspace.id.in_(bound)).order_by(Workspace.id)
        )
    )
    workspace = session.get(Workspace, workspace_id)
    here = workspace.name if workspace is not None else str(workspace_id)
    serves = ", ".join(f"'{n}'" for n in names)
    plural = "workspace" if len(names) == 1 else "workspaces"
    raise InvalidArgumentError(
        f"resource pool '{pool}' is bound to {plural} {serves} and serves only their experiments "
        f"and tasks; this {what} is in workspace '{here}' (use another resource pool, or ask a "
        f"cluster admin to bind '{pool}' to '{here}')"
    )
