"""``AgentSettings``: everything the agent daemon is configured with, read once and passed down.

The CLI (``stalwart agent``) builds one :class:`AgentSettings` from its options (and the
``STALWART_AGENT_TOKEN`` variable); no other agent module reads the environment or the command
line. The helpers here resolve the values that need a look at the host: the enrollment token
(option, variable or file), and the address the agent advertises. The agent's own token is not a
setting: the master issues it at enrollment and the agent keeps it in ``<home>/agent_token``
(:mod:`stalwart.agent.credentials`).
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from stalwart.agent.protocol import DeviceType
from stalwart.errors import InvalidArgumentError

__all__ = [
    "AgentSettings",
    "ContainerRuntime",
    "MountNamespaceMode",
    "PythonMapping",
    "default_address",
    "is_loopback_url",
    "parse_python_mapping",
    "read_token",
]

ContainerRuntime = Literal["none", "docker", "podman"]
MountNamespaceMode = Literal["auto", "require", "off"]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PythonMapping(_Settings):
    """Task images matching ``pattern`` (fnmatch) run with the local Python at ``path``."""

    pattern: str = Field(description="fnmatch pattern matched against ``TaskSpec.image``.")
    path: Path = Field(description="A virtual environment directory or a python executable.")


class AgentSettings(_Settings):
    """The agent's configuration (one object, read once by the CLI)."""

    master_url: str = Field(description="Base URL of the master, e.g. http://10.0.0.1:8080.")
    agent_id: str = Field(min_length=1, description="The agent's id (default: the hostname).")
    token: str = Field(
        default="",
        repr=False,
        description="The cluster's enrollment token (the master's agent token): it enrolls "
        "the agent when ``<home>/agent_token`` holds no token of its own, and once more when "
        "the master refuses that one. Empty: none (the agent then needs its own token).",
    )
    resource_pool: str = Field(default="default", description="The pool the agent serves.")
    slots: int | None = Field(
        default=None, ge=1, description="How many slots to offer (default: every GPU, or 1 CPU)."
    )
    slot_type: DeviceType | None = Field(
        default=None, description="Force the slot type (default: detected)."
    )
    home: Path = Field(description="The agent's state directory (task directories live here).")
    addresses: list[str] = Field(
        default_factory=list, description="Addresses other nodes and tasks reach this agent at."
    )
    pythons: list[PythonMapping] = Field(
        default_factory=list, description="Image patterns mapped to local Python environments."
    )
    container_runtime: ContainerRuntime = Field(
        default="none", description="none (local processes), docker or podman."
    )
    image_pull_timeout: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds an image pull may take before it is stopped and the task fails "
        "with a message saying so (docker/podman).",
    )
    mount_namespaces: MountNamespaceMode = Field(
        default="auto",
        description="Local tasks in private mount namespaces (their own /run/determined and "
        "/determined_shared_fs, for the official harness): auto (tasks that import determined, "
        "when the node allows it), require (every task; refuse to start without) or off. Without "
        "them, tasks written for the official harness run one at a time per node.",
    )
    determined_env: Path | None = Field(
        default=None,
        description="Where the virtual environment with the official ``determined`` harness "
        "lives (built on first need; local processes only), for tasks that import determined "
        "and match no ``pythons`` mapping. None: no such environment (those tasks run with the "
        "agent's Python).",
    )
    task_user: str = Field(
        default="nobody",
        min_length=1,
        description="USER or USER:GROUP (names or numbers) that an agent running as root runs "
        "the tasks of non-admins as, when their owner is linked to no agent user. An agent that "
        "is not root runs every task as itself.",
    )
    warm_start: bool = Field(
        default=True,
        description="Fork local tasks that are a bare ``python SCRIPT`` or ``python -m MODULE`` "
        "from a warm Python with the harness imported (:mod:`stalwart.agent.warm`); each task is "
        "still a process of its own. Off: every task starts a new interpreter.",
    )
    kill_on_exit: bool = Field(
        default=False, description="Kill the containers when the agent stops (default: leave)."
    )
    idle_wait_seconds: float = Field(
        default=20.0, gt=0, le=300, description="Long-poll wait when nothing changed."
    )
    max_backoff_seconds: float = Field(
        default=2.0, gt=0, description="Longest pause between tries while the master is away."
    )
    kill_grace_seconds: float = Field(
        default=10.0, ge=0, description="SIGTERM to SIGKILL grace when stopping with kill."
    )
    exit_log_wait_seconds: float = Field(
        default=5.0,
        ge=0,
        description="Longest wait for a container's last lines to ship before its exit is "
        "reported anyway.",
    )
    shutdown_log_timeout_seconds: float = Field(
        default=5.0, ge=0, description="Longest wait for buffered lines when the agent stops."
    )
    log_batch_lines: int = Field(default=1000, ge=1, description="Most log lines per post.")
    log_flush_seconds: float = Field(
        default=0.5, gt=0, description="How often buffered log lines are posted."
    )
    log_buffer_lines: int = Field(
        default=100_000, ge=1, description="Lines kept per container while the master is away."
    )

    @field_validator("master_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the master URL must be http(s)://HOST[:PORT], got {value!r}")
        return value.rstrip("/")


def parse_python_mapping(text: str) -> PythonMapping:
    """``IMAGE_PATTERN=PATH`` from ``--python``; the path must be a venv or an executable."""
    pattern, sep, path = text.partition("=")
    if not sep or not pattern or not path:
        raise InvalidArgumentError(f"--python wants IMAGE_PATTERN=PATH, got {text!r}")
    where = Path(path).expanduser()
    if not where.exists():
        raise InvalidArgumentError(f"--python {text}: {where} does not exist")
    return PythonMapping(pattern=pattern, path=where)


def read_token(
    token: str | None, token_file: Path | None, fallback: Path | None, *, required: bool = True
) -> str:
    """The enrollment token: ``token`` if given, else ``token_file``, else ``fallback`` if it
    exists.

    Raises InvalidArgumentError when a given file cannot be read or is empty, and when none
    gives a token and one is ``required`` (else "": an agent that holds its own token in its
    home needs no enrollment token).
    """
    if token:
        return token.strip()
    for path in (token_file, fallback):
        if path is None or (path is fallback and not path.is_file()):
            continue
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read the agent token from {path}: {exc}") from exc
        if value:
            return value
        raise InvalidArgumentError(f"the agent token file {path} is empty")
    if not required:
        return ""
    raise InvalidArgumentError(
        "no agent token: give --token, STALWART_AGENT_TOKEN or --token-file "
        "(the master writes its token to <master home>/agent_token)"
    )


def is_loopback_url(url: str) -> bool:
    """Whether the URL's host is a loopback address or ``localhost``."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_address(master_url: str) -> str:
    """The address to advertise: 127.0.0.1 for a loopback master, else the outbound address.

    The outbound address is the local end of a UDP "connection" towards the master (no packet
    is sent); when that fails, the hostname's address.
    """
    if is_loopback_url(master_url):
        return "127.0.0.1"
    parts = urlsplit(master_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        info = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_DGRAM)
        family, _, _, _, sockaddr = info[0]
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect(sockaddr)
            return str(sock.getsockname()[0])
    except OSError:
        return socket.gethostbyname(socket.gethostname())
