"""``stalwart shell``: an ssh session into a shell task, through the master.

``start [-- CMD...]`` launches a shell, waits for its sshd, and runs the system ``ssh`` with
the shell's private key (in a 0600 temporary file, removed afterwards), as the shell's
``agentUserGroup.user`` (``root`` when empty), with ``-o StrictHostKeyChecking=no`` (every
shell has a fresh host key) and Stalwart's own tunnel as its ``ProxyCommand``:
``python -m stalwart shell tunnel MASTER %h``, which carries ssh's bytes over a WebSocket to
``/proxy/{id}/`` (the master's TCP tunnel to the task's sshd). ``open ID`` connects to a
running shell. The CLI exits with ssh's status: the remote command's exit code.
``--show-ssh-command`` prints the ssh command line (for VS Code's Remote-SSH and the like) and
keeps the key file it names.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Annotated

import typer

from stalwart.cli.common import client, err, out
from stalwart.cli.interactive import (
    CONFIG_FILE,
    CONTEXT,
    DETACH,
    INCLUDES,
    OVERRIDES,
    TEMPLATE,
    add_list_and_kill,
    launch_config,
    wait_ready,
)
from stalwart.client import InteractiveTask
from stalwart.client.errors import MasterUnreachableError
from stalwart.errors import FailedPreconditionError, InvalidArgumentError, UnavailableError

__all__ = ["app", "proxy_command", "ssh_argv", "tunnel_url"]

app = typer.Typer(help="ssh sessions into shell tasks, through the master.", no_args_is_help=True)

_SHOW = typer.Option(
    "--show-ssh-command", help="Print the ssh command line (VS Code) and keep its key file."
)
_COMMAND = typer.Argument(help="A command to run instead of a login shell (after --).")
_RUN_SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": True}
_CHUNK = 64 * 1024


def tunnel_url(master: str, task_id: str) -> str:
    """The WebSocket URL of a task's TCP tunnel: ``ws(s)://<master>/proxy/<id>/``."""
    if master.startswith("https://"):
        base = "wss://" + master.removeprefix("https://")
    elif master.startswith("http://"):
        base = "ws://" + master.removeprefix("http://")
    else:
        raise InvalidArgumentError(f"the master's URL {master!r} is not http(s)://")
    return f"{base.rstrip('/')}/proxy/{task_id}/"


def proxy_command(master: str, python: str = sys.executable) -> str:
    """ssh's ``ProxyCommand``: this Python's tunnel to ``master`` (``%h``: the shell's id)."""
    return f"{shlex.quote(python)} -m stalwart shell tunnel {shlex.quote(master)} %h"


def ssh_argv(
    *,
    master: str,
    task_id: str,
    user: str,
    key_path: str,
    command: list[str],
    tty: bool,
    ssh: str = "ssh",
    python: str = sys.executable,
) -> list[str]:
    """The ssh command line into shell ``task_id`` as ``user`` with the key at ``key_path``."""
    return [
        ssh,
        "-o",
        f"ProxyCommand={proxy_command(master, python)}",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        key_path,
        "-t" if tty else "-T",
        f"{user or 'root'}@{task_id}",
        *command,
    ]


def _connect(task: InteractiveTask, command: list[str], *, show: bool) -> None:
    """Run ssh into ``task`` (ready); exits with ssh's status."""
    key = task.data.private_key
    if not key:
        raise FailedPreconditionError(
            f"the master did not give the key of shell {task.id}",
            hint="only the shell's owner and admins may open it",
        )
    ssh = shutil.which("ssh")
    if ssh is None:
        raise FailedPreconditionError(
            "no ssh client found on PATH", hint="install OpenSSH's client (apt install ssh)"
        )
    user = str((task.data.agent_user_group or {}).get("user") or "root")
    fd, key_path = tempfile.mkstemp(prefix=f"stalwart-shell-{task.id[:8]}-", suffix=".key")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(key if key.endswith("\n") else key + "\n")
        os.chmod(key_path, 0o600)
        argv = ssh_argv(
            master=client().master,
            task_id=task.id,
            user=user,
            key_path=key_path,
            command=command,
            tty=sys.stdin.isatty() and sys.stdout.isatty(),
            ssh=ssh,
        )
        if show:
            out().print(shlex.join(argv), markup=False, soft_wrap=True)
        code = subprocess.call(argv)
    finally:
        if not show:
            Path(key_path).unlink(missing_ok=True)
    raise typer.Exit(code)


@app.command("start", context_settings=_RUN_SETTINGS)
def start(
    command: Annotated[list[str] | None, _COMMAND] = None,
    context: Annotated[Path | None, CONTEXT] = None,
    config_file: Annotated[Path | None, CONFIG_FILE] = None,
    overrides: Annotated[list[str] | None, OVERRIDES] = None,
    includes: Annotated[list[Path] | None, INCLUDES] = None,
    template: Annotated[str | None, TEMPLATE] = None,
    detach: Annotated[bool, DETACH] = False,
    show: Annotated[bool, _SHOW] = False,
) -> None:
    """Start a shell and ssh into it (or run a command there)."""
    config = launch_config(config_file, overrides)
    task = client().launch_shell(config, context, includes=includes or [], template=template)
    if detach:
        out().print(task.id, markup=False)
        return
    err().print(f"Launched shell {task.id}", markup=False)
    wait_ready(task)
    _connect(task, command or [], show=show)


@app.command("open", context_settings=_RUN_SETTINGS)
def open_shell(
    task_id: Annotated[str, typer.Argument(help="The shell.")],
    command: Annotated[list[str] | None, _COMMAND] = None,
    show: Annotated[bool, _SHOW] = False,
) -> None:
    """ssh into a running shell (or run a command there)."""
    task = client().get_interactive(task_id, "shell")
    if task.ended:
        raise FailedPreconditionError(
            f"shell {task.id} has ended", hint="start one with `stalwart shell start`"
        )
    wait_ready(task)
    _connect(task, command or [], show=show)


@app.command("tunnel", hidden=True)
def tunnel(
    master: Annotated[str, typer.Argument(help="The master's URL.")],
    task_id: Annotated[str, typer.Argument(help="The task (ssh's %h).")],
) -> None:
    """ssh's ProxyCommand: stdin and stdout to the task's TCP service, over a WebSocket."""
    run_tunnel(tunnel_url(master, task_id))


def run_tunnel(url: str) -> None:
    """Pipe this process's stdin to the WebSocket at ``url`` and its binary frames to stdout
    until either side closes. Raises a StalwartError when the tunnel cannot be opened."""
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
    from websockets.sync.client import connect

    try:
        ws = connect(url, max_size=None, compression=None, open_timeout=30)
    except InvalidStatus as exc:
        body = exc.response.body.decode("utf-8", "replace") if exc.response.body else ""
        raise UnavailableError(
            f"the master refused the tunnel to {url} ({exc.response.status_code}) {body}".strip()
        ) from None
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        raise MasterUnreachableError(f"cannot open the tunnel {url}: {exc}") from None

    def upstream() -> None:
        try:
            while data := os.read(0, _CHUNK):
                ws.send(data)
        except (OSError, ConnectionClosed):
            pass
        ws.close()

    threading.Thread(target=upstream, name="tunnel-stdin", daemon=True).start()
    output = sys.stdout.buffer
    try:
        for message in ws:
            output.write(message if isinstance(message, bytes) else message.encode())
            output.flush()
    except (ConnectionClosed, BrokenPipeError):
        pass
    finally:
        ws.close()


add_list_and_kill(app, "shell", "shells")
