"""``stalwart master``: run the master (REST API, database, scheduler).

``stalwart master [--config master.yaml] [--port 8080] [--db URL] [--home DIR]
[--tls-cert FILE --tls-key FILE] [--workers N]`` serves until Ctrl-C or SIGTERM, then stops
cleanly within 5 s (HTTPS with a certificate; proxy headers only from ``http.trusted_proxies``:
:mod:`stalwart.master.serve`; from N processes: :mod:`stalwart.master.supervisor`). It needs
the ``master`` extra; the import happens only when it runs.
``stalwart master info``, ``stalwart master config`` and ``stalwart master logs`` ask a running
master instead.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from stalwart.cli.common import client, out, print_json

__all__ = ["app"]

app = typer.Typer(help="Run the master, or inspect a running one (info, config, logs).")


def _configure_logging() -> None:
    """The master process logs Stalwart's records from INFO up: all of them reach the master's
    log ring (``stalwart master logs``); WARNING and above also go to stderr, as before."""
    console = logging.StreamHandler()
    console.setLevel(logging.WARNING)
    console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(console)
    stalwart = logging.getLogger("stalwart")
    if stalwart.level == logging.NOTSET:
        stalwart.setLevel(logging.INFO)


@app.callback(invoke_without_command=True)
def master(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Master config file (YAML).")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default 8080).")] = None,
    db: Annotated[
        str | None, typer.Option(help="Database URL (default: SQLite under --home).")
    ] = None,
    home: Annotated[
        Path | None, typer.Option(help="State directory (default ~/.stalwart).")
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option(help="PEM certificate: serve HTTPS (with --tls-key).")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option(help="PEM private key of --tls-cert.")] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Processes serving the API (default 1; more use more cores)."),
    ] = None,
) -> None:
    """Run the master (when no subcommand is given)."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        from stalwart.master.serve import master_url, serve
        from stalwart.master.settings import load_settings
    except ImportError as exc:
        raise typer.BadParameter(
            f"the master needs its extra: pip install 'stalwart[master]' ({exc.name} missing)"
        ) from exc
    tls = {k: v for k, v in (("tls_cert", tls_cert), ("tls_key", tls_key)) if v is not None}
    settings = load_settings(
        config,
        overrides={
            "host": host,
            "port": port,
            "db": db,
            "home": home,
            "workers": workers,
            "http": tls or None,
        },
    )
    _configure_logging()
    os.umask(0o077)  # the master's files are its own (stalwart.master.home)
    typer.echo(
        f"Stalwart master on {master_url(settings)} "
        f"(database: {settings.database_url.split('://', 1)[0]})"
    )
    serve(settings)  # SIGTERM: a clean stop within 5 s (stalwart.master.stopping)


@app.command("info")
def info(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Show the master's version and identity."""
    api = client()
    found = api.master_info()
    if as_json:
        print_json(found)
        return
    console = out()
    for line in (
        f"Master: {api.master}",
        f"Cluster: {found.cluster_name} ({found.cluster_id})",
        f"Master id: {found.master_id}",
        f"Stalwart version: {found.stalwart_version or 'unknown'}",
        f"Determined wire version: {found.version}",
    ):
        console.print(line, markup=False)


@app.command("config")
def config(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Show the master's effective settings (admins only; secrets removed)."""
    settings = client().master_config()
    if as_json:
        print_json(settings)
    else:
        typer.echo(yaml.safe_dump(settings, sort_keys=False, default_flow_style=False).rstrip())


@app.command("logs")
def logs(
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming new records (Ctrl-C stops).")
    ] = False,
    tail: Annotated[
        int | None, typer.Option(min=1, help="Only the last N records (default: all kept).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (v1LogEntry) per line.")
    ] = False,
) -> None:
    """Print the master's own recent log records (the last 10,000 it keeps in memory)."""
    for entry in client().master_logs(follow=follow, tail=tail):
        if as_json:
            line = json.dumps(entry.model_dump(mode="json", by_alias=True))
        else:
            level = entry.level.removeprefix("LOG_LEVEL_")
            line = f"{entry.timestamp} [{level}]: {entry.message}"
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
