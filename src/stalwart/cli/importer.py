"""``stalwart import determined``: bring a Determined cluster's history into this master.

``stalwart import determined --from postgresql://USER@HOST/DB [--dry-run] [--workspace NAME]
[--task-logs] [--config FILE | --db URL | --home DIR] [--json]``. It writes the master's
database directly (the one ``stalwart master`` with the same ``--config`` / ``--db`` /
``--home`` uses), reads the Determined database read-only, and prints the report
(docs/migrating-from-determined.md).
Progress goes to stderr: a bar on a terminal, otherwise one line per batch of metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stalwart.cli.common import err, out, print_json

__all__ = ["app"]

app = typer.Typer(help="Import another platform's history into this master.", no_args_is_help=True)


class _Lines:
    """Progress as plain lines (stderr is not a terminal): one per step forward."""

    def __init__(self) -> None:
        self._last: dict[str, int] = {}

    def __call__(self, what: str, done: int, total: int) -> None:
        if self._last.get(what) == done:
            return
        self._last[what] = done
        err().print(f"{what}: {done}/{total}", highlight=False, soft_wrap=True)


@app.command("determined")
def determined(
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="The Determined database: postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE "
            "(read only; a read-only database user is enough).",
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would be imported; write nothing.")
    ] = False,
    workspace: Annotated[
        str | None,
        typer.Option(help="Import only this Determined workspace (users are always imported)."),
    ] = None,
    task_logs: Annotated[
        bool,
        typer.Option("--task-logs", help="Import the trials' task logs too (they can be large)."),
    ] = False,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="The master's config file (YAML).")
    ] = None,
    db: Annotated[
        str | None, typer.Option(help="The master's database URL (default: SQLite under --home).")
    ] = None,
    home: Annotated[
        Path | None, typer.Option(help="The master's state directory (default ~/.stalwart).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Import a Determined 0.38 database: users (with their passwords), workspaces, projects,
    experiments, trials, metrics, checkpoints, models, templates and webhooks. Run it again to
    import what is new, or to finish an import that was interrupted."""
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        from stalwart.master.db.engine import make_engine
        from stalwart.master.importer import import_determined
        from stalwart.master.settings import load_settings
    except ImportError as exc:
        raise typer.BadParameter(
            f"importing needs the master's extra: pip install 'stalwart[master]' "
            f"({exc.name} missing)"
        ) from exc
    settings = load_settings(config, overrides={"db": db, "home": home})
    if not settings.db:
        settings.home.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.database_url)
    try:
        if err().is_terminal:
            with Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=err(),
                transient=True,
            ) as bar:
                tasks: dict[str, int] = {}

                def show(what: str, done: int, total: int) -> None:
                    if what not in tasks:
                        tasks[what] = int(bar.add_task(what, total=total))
                    bar.update(tasks[what], completed=done, total=total)  # type: ignore[arg-type]

                report = import_determined(
                    source,
                    engine,
                    dry_run=dry_run,
                    workspace=workspace,
                    task_logs=task_logs,
                    initial_password=settings.security.initial_user_password,
                    progress=show,
                )
        else:
            report = import_determined(
                source,
                engine,
                dry_run=dry_run,
                workspace=workspace,
                task_logs=task_logs,
                initial_password=settings.security.initial_user_password,
                progress=_Lines(),
            )
    finally:
        engine.dispose()
    if as_json:
        print_json(report.as_json())
    else:
        out().print(report.render(), highlight=False, markup=False, soft_wrap=True)
