"""``stalwart up`` / ``stalwart down``: a master and a local agent on this machine.

``stalwart up [--port 8080] [--home DIR] [--slots N] [--config master.yaml] [--python
PATTERN=PATH ...] [--detach]`` starts the master (SQLite in the home directory) and one agent
with this machine's slots, waits until both are ready and prints the URL. ``--python`` goes to
the agent as it is (task images to local Python environments); without it, tasks that import
``determined`` get the environment the agent builds for them on first use
(``STALWART_DETERMINED_ENV`` moves it, as for ``stalwart agent``). In the foreground it stops
both cleanly on Ctrl-C or SIGTERM; with ``--detach`` it returns at once and ``stalwart down
[--home DIR]`` stops them later.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from stalwart.errors import FailedPreconditionError
from stalwart.local import LocalCluster, stop_pid

__all__ = ["down", "up"]


def _home(home: Path | None) -> Path:
    if home is not None:
        return home.expanduser().resolve()
    env = os.environ.get("STALWART_HOME")
    return Path(env).expanduser().resolve() if env else Path("~/.stalwart").expanduser()


def _running(home: Path) -> dict[str, object] | None:
    path = home / "up.json"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pids = state.get("pids", {}) if isinstance(state, dict) else {}
    alive = False
    for pid in pids.values():
        try:
            os.kill(int(pid), 0)
            alive = True
        except (ProcessLookupError, ValueError):
            continue
    if not alive:
        path.unlink(missing_ok=True)
        return None
    return state if isinstance(state, dict) else None


def up(
    port: Annotated[int, typer.Option(help="Port of the master.")] = 8080,
    home: Annotated[
        Path | None, typer.Option(help="State directory (default $STALWART_HOME or ~/.stalwart).")
    ] = None,
    slots: Annotated[
        int | None, typer.Option(help="Slots of the local agent (default: this machine's).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Master config file (YAML).")
    ] = None,
    python: Annotated[
        list[str] | None,
        typer.Option(
            help="IMAGE_PATTERN=PATH: the local agent runs matching task images with this "
            "venv/python (repeatable; as `stalwart agent --python`)."
        ),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Run in the background; stop with `down`.")
    ] = False,
) -> None:
    """Start a master and a local agent on this machine."""
    root = _home(home)
    root.mkdir(parents=True, exist_ok=True)
    running = _running(root)
    if running is not None:
        raise FailedPreconditionError(
            f"a local cluster already runs from {root} at {running.get('url')}",
            hint="stop it with `stalwart down`, or pass another --home",
        )
    cluster = LocalCluster(home=root, port=port, master_config=config, detach=detach)
    try:
        cluster.start_master()
        extra = [arg for item in python or () for arg in ("--python", item)]
        cluster.start_agent("local", slots=slots, extra=extra)
    except BaseException:
        cluster.stop()
        raise
    typer.echo(f"Stalwart is up at {cluster.url} (home: {root})")
    if detach:
        cluster.write_state()
        typer.echo("Stop it with: stalwart down" + (f" --home {root}" if home else ""))
        return
    typer.echo("Press Ctrl-C to stop.")
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop.is_set():
        if cluster.master is not None and cluster.master.poll() is not None:
            typer.echo(f"the master exited (code {cluster.master.returncode}); stopping")
            break
        stop.wait(0.5)
    typer.echo("Stopping the agent and the master...")
    cluster.stop()
    typer.echo("Stopped.")


def down(
    home: Annotated[
        Path | None, typer.Option(help="State directory (default $STALWART_HOME or ~/.stalwart).")
    ] = None,
) -> None:
    """Stop a cluster started with `stalwart up --detach`."""
    root = _home(home)
    state = _running(root)
    if state is None:
        typer.echo(f"No local cluster runs from {root}.")
        return
    pids = state.get("pids", {})
    assert isinstance(pids, dict)
    for name in sorted(pids, key=lambda n: n == "master"):  # agents first
        stop_pid(int(pids[name]))
    (root / "up.json").unlink(missing_ok=True)
    typer.echo(f"Stopped the local cluster at {state.get('url')}.")
