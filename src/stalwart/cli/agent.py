"""``stalwart agent``: run the agent daemon on this node.

``stalwart agent --master URL [--id NAME] [--slots N] [--slot-type cpu|cuda|rocm] [--pool NAME]
[--token TOKEN | STALWART_AGENT_TOKEN | --token-file FILE] [--home DIR] [--address ADDR]
[--python PATTERN=PATH ...] [--container-runtime none|docker|podman]
[--mount-namespaces auto|require|off] [--determined-env PATH|off] [--no-warm-start]
[--kill-on-exit]``

``stalwart agent list [--json]`` lists the master's agents instead; ``stalwart agent tokens
[--json]`` lists the agents' credentials and ``stalwart agent revoke AGENT_ID [--reenroll]``
revokes one (admins; see docs/security.md).

It syncs with the master until Ctrl-C or SIGTERM, then exits leaving its containers running
(``--kill-on-exit`` stops them first). The token option gives the cluster's enrollment token:
the agent's first sync enrolls it and the master issues it a token of its own, kept in
``<home>/agent_token`` and presented from then on; with that file present no enrollment token
is needed. Without a token option it reads the default master's ``~/.stalwart/agent_token``
when that file exists.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from pathlib import Path
from types import FrameType
from typing import Annotated, Literal

import typer
from pydantic import ValidationError

from stalwart._private import private_directory
from stalwart.cli import common
from stalwart.cli.agent_tokens import list_agent_tokens, revoke_agent_token
from stalwart.cli.slot import list_agents
from stalwart.errors import InvalidArgumentError

__all__ = ["app"]

app = typer.Typer(
    help="Run the agent daemon (runs tasks for a master), list agents, or manage their tokens."
)
app.command("list")(list_agents)
app.command("tokens")(list_agent_tokens)
app.command("revoke")(revoke_agent_token)

DEFAULT_HOME = Path("~/.stalwart/agent")
DEFAULT_TOKEN_FILE = Path("~/.stalwart/agent_token")


@app.callback(invoke_without_command=True)
def agent(
    ctx: typer.Context,
    master: Annotated[
        str | None,
        typer.Option(help="The master's URL, e.g. http://10.0.0.1:8080 (required to run)."),
    ] = None,
    agent_id: Annotated[
        str | None, typer.Option("--id", help="The agent's id (default: the hostname).")
    ] = None,
    slots: Annotated[
        int | None, typer.Option(min=1, help="Slots to offer (default: every GPU, or 1 CPU).")
    ] = None,
    slot_type: Annotated[
        Literal["cpu", "cuda", "rocm"] | None,
        typer.Option(help="Force the slot type (default: detected)."),
    ] = None,
    pool: Annotated[str, typer.Option(help="The resource pool to serve.")] = "default",
    token: Annotated[
        str | None,
        typer.Option(
            envvar="STALWART_AGENT_TOKEN",
            help="The cluster's agent token, which enrolls the agent (not needed once "
            "<home>/agent_token holds the agent's own).",
        ),
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(help="Read the token from this file (<master home>/agent_token).")
    ] = None,
    home: Annotated[
        Path | None, typer.Option(help="State directory (default ~/.stalwart/agent).")
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(help="Address tasks and peers reach this node at (default: detected)."),
    ] = None,
    python: Annotated[
        list[str] | None,
        typer.Option(help="IMAGE_PATTERN=PATH: run matching images with this venv/python."),
    ] = None,
    container_runtime: Annotated[
        Literal["none", "docker", "podman"],
        typer.Option(help="none (local processes), docker or podman."),
    ] = "none",
    image_pull_timeout: Annotated[
        float,
        typer.Option(help="Seconds an image pull may take (docker/podman) before it is stopped."),
    ] = 3600.0,
    mount_namespaces: Annotated[
        Literal["auto", "require", "off"],
        typer.Option(
            help="Run local tasks in private mount namespaces (their own /run/determined, for "
            "the official harness): auto (tasks that import determined, when the node allows "
            "it), require (every task), or off (then such tasks run one at a time)."
        ),
    ] = "auto",
    determined_env: Annotated[
        str | None,
        typer.Option(
            envvar="STALWART_DETERMINED_ENV",
            help="The virtual environment local tasks that import determined run with (built "
            "on first need with determined==0.38.1; default: "
            "~/.cache/stalwart/determined-0.38.1-...), or off.",
        ),
    ] = None,
    task_user: Annotated[
        str,
        typer.Option(
            help="USER[:GROUP] a root agent runs non-admins' tasks as (when their owner is "
            "linked to no agent user)."
        ),
    ] = "nobody",
    warm_start: Annotated[
        bool,
        typer.Option(
            help="Fork local `python SCRIPT` / `python -m MODULE` tasks from a warm Python "
            "that has the harness imported (a fresh process per task all the same)."
        ),
    ] = True,
    kill_on_exit: Annotated[
        bool, typer.Option(help="Stop the containers when the agent stops.")
    ] = False,
) -> None:
    """Run the agent (when no subcommand is given)."""
    if ctx.invoked_subcommand is not None:
        if master is not None:
            common.use_master(master)
        return
    if master is None:
        raise typer.BadParameter("the agent needs its master's URL", param_hint="'--master'")
    from stalwart.agent.credentials import TOKEN_FILE
    from stalwart.agent.determined_env import from_option
    from stalwart.agent.devices import detect_slots
    from stalwart.agent.loop import create_agent
    from stalwart.agent.settings import (
        AgentSettings,
        default_address,
        parse_python_mapping,
        read_token,
    )

    agent_home = (home or DEFAULT_HOME).expanduser().absolute()
    enrolled = (agent_home / TOKEN_FILE).is_file()  # then an enrollment token is optional
    try:
        settings = AgentSettings(
            master_url=master,
            agent_id=agent_id or socket.gethostname(),
            token=read_token(
                token, token_file, DEFAULT_TOKEN_FILE.expanduser(), required=not enrolled
            ),
            resource_pool=pool,
            slots=slots,
            slot_type=slot_type,
            home=agent_home,
            addresses=[address] if address else [],
            pythons=[parse_python_mapping(item) for item in python or ()],
            container_runtime=container_runtime,
            image_pull_timeout=image_pull_timeout,
            mount_namespaces=mount_namespaces,
            determined_env=from_option(determined_env),
            task_user=task_user,
            warm_start=warm_start,
            kill_on_exit=kill_on_exit,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise InvalidArgumentError(f"invalid agent settings: {problems}") from exc
    if not settings.addresses:
        settings = settings.model_copy(update={"addresses": [default_address(settings.master_url)]})
    found = detect_slots(settings.slot_type, settings.slots)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise
    os.umask(0o077)  # the agent's files are its own; tasks get 0022 back (runner)
    private_directory(settings.home)
    loop = create_agent(settings, found)

    def _stop(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("stalwart.agent").info("%s: stopping", signal.Signals(signum).name)
        loop.stop()

    previous = {signum: signal.signal(signum, _stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    kinds = ", ".join(sorted({slot.device_type for slot in found}))
    typer.echo(
        f"Stalwart agent {settings.agent_id!r}: {len(found)} {kinds} slot(s), "
        f"master {settings.master_url}, home {settings.home}"
    )
    try:
        loop.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
