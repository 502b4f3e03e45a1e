"""One run of ``stalwart import determined``: the steps in order, and the report."""

from __future__ import annotations

import time

from sqlalchemy import Engine

from stalwart.errors import NotFoundError
from stalwart.master.db import migrate
from stalwart.master.db.engine import make_session_factory
from stalwart.master.importer.context import Context, Progress
from stalwart.master.importer.history import import_experiments
from stalwart.master.importer.ids import Mappings
from stalwart.master.importer.logs import import_task_logs
from stalwart.master.importer.metrics import import_metrics
from stalwart.master.importer.people import import_projects, import_users, import_workspaces
from stalwart.master.importer.registry import import_models, import_templates, import_webhooks
from stalwart.master.importer.report import ImportReport
from stalwart.master.importer.source import DeterminedSource
from stalwart.master.services.bootstrap import bootstrap

__all__ = ["import_determined"]


def _quiet(what: str, done: int, total: int) -> None:
    """No progress display."""


def import_determined(
    source_url: str,
    engine: Engine,
    *,
    dry_run: bool = False,
    workspace: str | None = None,
    task_logs: bool = False,
    initial_password: str = "",
    progress: Progress = _quiet,
) -> ImportReport:
    """Import the Determined database at ``source_url`` (read-only) into the Stalwart master
    database of ``engine`` (migrated to head and bootstrapped first, as a master's start
    does); the report.

    Idempotent and resumable: what ``import_mappings`` says was imported is not imported again,
    so a second run brings only what is new and a run that was interrupted goes on where its
    last commit left it. ``workspace`` limits the import to one Determined workspace (users are
    always all imported); ``task_logs`` imports the trials' task logs too. ``dry_run`` does the
    whole import in one transaction and rolls it back (metrics and logs only counted): only the
    migrations and the built-in users, workspace and project, which any master start writes,
    stay. Raises NotFoundError for an unknown workspace,
    FailedPreconditionError for a database that is not Determined 0.29 or later.
    """
    started = time.monotonic()
    migrate.upgrade(engine)
    sessions = make_session_factory(engine)
    with DeterminedSource(source_url) as source, sessions() as session:
        bootstrap(session, initial_password)  # as a master's start does (it commits)
        cluster = source.cluster_id()
        report = ImportReport(source=cluster, dry_run=dry_run)
        workspaces = {int(w["id"]): str(w["name"]) for w in source.workspaces()}
        if workspace is not None:
            chosen = {i for i, name in workspaces.items() if name == workspace}
            if not chosen:
                raise NotFoundError(
                    f"the Determined database has no workspace named {workspace!r} "
                    f"(it has: {', '.join(sorted(workspaces.values()))})"
                )
        else:
            chosen = set(workspaces)
        ctx = Context(
            session=session,
            source=source,
            ids=Mappings(session, cluster),
            report=report,
            dry_run=dry_run,
            workspaces=chosen,
            progress=progress,
            task_logs=task_logs,
            filtered=workspace is not None,
        )
        for step in (
            import_users,
            import_workspaces,
            import_projects,
            import_experiments,
            import_models,
            import_templates,
            import_webhooks,
            import_metrics,
            import_task_logs,
        ):
            step(ctx)
        report.left_out = source.left_out(frozenset({"task_logs"}) if task_logs else frozenset())
        if dry_run:
            session.rollback()
    report.seconds = time.monotonic() - started
    return report
