"""The agent <-> master protocol: one long-polled ``POST /api/v1/agents/{agent_id}/sync``.

The agent is the client; the master never connects to an agent. Each sync is the agent's whole
view (its slots and every container it knows) and the master's answer is what to change. This
makes the protocol stateless and restart-safe on both sides:

- **Heartbeat and registration.** Every sync registers (idempotently) and heartbeats the agent.
- **Reattach.** When the master restarts, the agent keeps its containers running and keeps
  retrying; its next sync reports them and the master, whose database still lists them, carries
  on. Nothing is killed because the master went away.
- **Start.** The master answers with a :class:`TaskSpec` for every container assigned to the
  agent that the agent did not report. Starting is idempotent per ``(allocation_id, rank)``:
  an agent ignores a spec for a container it already runs. A spec with ``after`` is a
  **queued successor**: it takes the slots of that allocation's container on this agent, and
  the agent holds it (state ``QUEUED``) until that container's process exits, then starts it at
  once, without waiting for the master (the master already counted the slots as passing to
  it); when no such container runs here any more, it starts it right away.
- **Exit.** An exited container stays in the agent's reports (state ``EXITED`` with its exit
  code) until the master lists it in ``forget``: the master has durably recorded the exit.
  The container's last log lines may travel with its exit (``logs``): the master stores them
  in the transaction that records the exit (once: a repeated exit report stores nothing), so
  a log follower that sees the trial end has every line, without a separate log post first.
  So may the metrics reports its harness had not delivered when it closed (``reports``, read
  from the task's spool, ``STALWART_REPORTS_SPOOL``): the master stores them before it
  records the exit (each once, whichever way it arrived), so a searcher that sees the exit
  has seen them.
- **Kill.** ``kill`` names allocations whose containers on this agent must stop (SIGTERM, then
  SIGKILL after ``kill_grace_seconds``); a container the master does not know is killed too.
- **Long-poll.** With nothing to change, the master holds the answer up to ``wait_seconds`` and
  answers early when work for the agent appears.

Authentication: the header ``X-Stalwart-Agent-Token`` carries the agent's own token. An agent
without one yet presents the cluster's **enrollment token** (the master's ``cluster.agent_token``
setting, or the one it generates into ``<master home>/agent_token``): when its agent id has no
credential, the master answers with ``agent_token`` set, the agent's own token, sent this once
and nothing else in that answer; the agent keeps it (``<agent home>/agent_token``, mode 0600)
and presents it from its next sync on. From the first sync with it, the enrollment token no
longer opens that agent id (401), nor does another agent's token; an admin revokes an agent's
token to forbid the id or to let it enroll again (``DELETE /api/v1/agents/{agent_id}/token``).
An agent whose own token is refused (401) may try the enrollment token once. The master's rules
are in :mod:`stalwart.master.services.agent_credentials`.

Only base dependencies (pydantic) are imported here: the agent and the master share it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AGENT_TOKEN_HEADER",
    "ContainerState",
    "ContainerStatus",
    "DeviceType",
    "LogLine",
    "RunAs",
    "SlotInfo",
    "SyncRequest",
    "SyncResponse",
    "TaskSpec",
]

AGENT_TOKEN_HEADER = "X-Stalwart-Agent-Token"

DeviceType = Literal["cpu", "cuda", "rocm"]
ContainerState = Literal["QUEUED", "STARTING", "RUNNING", "EXITED"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlotInfo(_Model):
    """One slot the agent offers: a GPU, or one CPU slot on a CPU-only agent."""

    id: str = Field(description="Slot id, unique on the agent (the device index for GPUs).")
    device_type: DeviceType = Field(description="cpu, cuda or rocm.")
    brand: str = Field(default="", description="Device name, e.g. 'NVIDIA H100 80GB HBM3'.")
    uuid: str = Field(default="", description="Device UUID (GPUs); empty for CPU slots.")


class LogLine(_Model):
    """One output line sent with a container's exit (the master adds the task, allocation and
    agent)."""

    log: str = Field(description="The line, ending in a newline.")
    timestamp: str = Field(description="When the agent read it (RFC 3339).")
    container_id: str = Field(description="The container it came from.")
    level: str | None = Field(default=None, description="LOG_LEVEL_*, when the line had one.")
    stdtype: str | None = Field(default=None, description="stdout or stderr.")
    source: str | None = Field(default=None, description="task (its output) or agent.")
    rank_id: int | None = Field(default=None, description="The rank prefix of the line.")


class ContainerStatus(_Model):
    """One container (task process group) as the agent sees it."""

    allocation_id: str = Field(description="The allocation the container belongs to.")
    rank: int = Field(ge=0, description="The container's rank within its allocation.")
    state: ContainerState = Field(
        description="QUEUED (a queued successor, see Start above), STARTING, RUNNING or EXITED."
    )
    pid: int | None = Field(default=None, description="Process id of the container's main process.")
    exit_code: int | None = Field(
        default=None,
        description="Exit status once EXITED (negative: killed by that signal; null: the agent "
        "could not start it or lost it).",
    )
    exit_reason: str | None = Field(
        default=None, description="Why it exited, when the agent knows more than the exit code."
    )
    logs: list[LogLine] = Field(
        default_factory=list,
        description="EXITED only: the container's last lines not yet shipped (see Exit above).",
    )
    reports: list[dict[str, Any]] = Field(
        default_factory=list,
        description="EXITED only: metrics reports the task's harness left in its spool, each "
        "as an item of the batch post's ``reports`` (see Exit above).",
    )
    pull_seconds: float | None = Field(
        default=None,
        ge=0.0,
        description="Seconds the agent spent pulling the container's image before starting it "
        "(null: nothing was pulled, or the runner uses no images). The master stores the "
        "longest over an allocation's containers.",
    )


class SyncRequest(_Model):
    """The agent's whole view, sent with every sync."""

    version: str = Field(default="", description="The agent's Stalwart version.")
    resource_pool: str = Field(default="default", description="The pool the agent serves.")
    addresses: list[str] = Field(
        default_factory=list, description="Addresses other nodes and tasks reach this agent at."
    )
    slots: list[SlotInfo] = Field(default_factory=list, description="Every slot of the agent.")
    containers: list[ContainerStatus] = Field(
        default_factory=list,
        description="Every container the agent runs or has seen exit and not yet been told to "
        "forget.",
    )
    wait_seconds: float = Field(
        default=0.0, ge=0.0, le=300.0, description="How long the master may hold the answer."
    )


class RunAs(_Model):
    """The OS identity a task runs under: its owner's linked agent user (``det user
    link-with-agent-user``). Either part may be a number or a name (the number wins; the
    agent resolves names on its node)."""

    uid: int | None = Field(default=None, ge=0, description="The user id.")
    user: str = Field(default="", description="The user name (when no uid is given).")
    gid: int | None = Field(default=None, ge=0, description="The group id.")
    group: str = Field(
        default="", description="The group name (when no gid is given; neither: the user's)."
    )


class TaskSpec(_Model):
    """Everything an agent needs to start one container of an allocation.

    The same spec feeds every runner (local processes, docker/podman, Slurm, Kubernetes): the
    runner adds only what depends on the node (``DET_MASTER`` as the node reaches the master,
    ``DET_AGENT_ID``, the working directory).
    """

    allocation_id: str = Field(description="The allocation (``<taskId>.<n>``).")
    task_id: str = Field(description="The task (``<expId>.<requestId>`` for trials).")
    rank: int = Field(ge=0, description="This container's rank in the allocation.")
    container_id: str = Field(description="``DET_RESOURCES_ID`` / ``DET_CONTAINER_ID``.")
    slot_ids: list[str] = Field(default_factory=list, description="The agent's slots it gets.")
    device_type: DeviceType = Field(default="cpu", description="The slots' device type.")
    image: str = Field(default="", description="The task's environment image.")
    force_pull_image: bool = Field(
        default=False,
        description="Pull the image even when the engine already holds it "
        "(``environment.force_pull_image``).",
    )
    registry_auth: dict[str, str] | None = Field(
        default=None,
        description="``environment.registry_auth`` (Docker's AuthConfig fields): the agent "
        "pulls the image with these credentials, from a private config file used for that "
        "pull only.",
    )
    argv: list[str] = Field(description="The command to run, in the working directory.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables of the task contract."
    )
    info_files: dict[str, str] = Field(
        default_factory=dict,
        description="Files for ``$DET_RUN_DIR/info`` (cluster.json, trial.json, "
        "rendezvous.json, resources.json), name -> JSON text.",
    )
    has_context: bool = Field(
        default=False,
        description="Whether the task has a model definition: fetch it from "
        "``GET /api/v1/tasks/{task_id}/context_directory`` and extract it into the workdir.",
    )
    token: str = Field(description="The allocation token (also ``DET_SESSION_TOKEN``).")
    user: str = Field(default="", description="The user the task runs for (``DET_USER``).")
    run_as: RunAs | None = Field(
        default=None,
        description="The OS user to run the task as: its owner's linked agent user. Null: an "
        "agent running as root runs an admin's task as itself and anyone else's as its "
        "unprivileged ``task_user``.",
    )
    privileged: bool = Field(
        default=False,
        description="The task's owner is an admin (see ``run_as``). False unless the master "
        "says so: an unknown owner runs unprivileged.",
    )
    startup_hook: str | None = Field(
        default=None,
        description="``task_container_defaults.startup_hook`` of the task's resource pool (or "
        "the master's): a bash script sourced before the command, ahead of the model "
        "definition's ``startup-hook.sh`` (:mod:`stalwart.agent.hooks`).",
    )
    after: str | None = Field(
        default=None,
        description="Queued successor of this allocation: start once its container on this "
        "agent has exited (see Start above); null: start now.",
    )


class SyncResponse(_Model):
    """What the agent must change."""

    start: list[TaskSpec] = Field(default_factory=list, description="Containers to start.")
    kill: list[str] = Field(
        default_factory=list, description="Allocations whose containers here must stop."
    )
    forget: list[str] = Field(
        default_factory=list,
        description="Exited containers the master has recorded, as ``<allocation_id>/<rank>``.",
    )
    kill_grace_seconds: float = Field(
        default=10.0, description="Time between SIGTERM and SIGKILL when killing."
    )
    prepull: list[str] = Field(
        default_factory=list,
        description="The images the agent's pool should hold before trials need them (the "
        "master's pre-pull plan, :mod:`stalwart.environments.prepull`). An agent with a "
        "container engine pulls those it lacks in the background; others ignore the list.",
    )
    sync_interval_seconds: float = Field(
        default=0.0,
        description="How soon to sync again after an answer with work in it (0: at once; the "
        "next sync long-polls, so this costs nothing and new work starts without delay).",
    )
    agent_token: str | None = Field(
        default=None,
        repr=False,
        description="The agent's own token, in the answer to a sync that enrolled it (made "
        "with the cluster's enrollment token) and never again: the agent stores it (``<agent "
        "home>/agent_token``, mode 0600) and presents it from its next sync on, which it makes "
        "at once. Such an answer carries nothing else. Null otherwise.",
    )
