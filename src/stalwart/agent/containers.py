"""``ContainerRunner``: containers through docker or podman (``--container-runtime``).

The engine's CLI runs attached (``docker run --rm ...``) as the process that
:class:`~stalwart.agent.runner.ProcessRunner` watches: its output is the container's, its exit
code the container's (125-127 are the engine's own failures). Stopping goes through the
engine (``docker kill``), since a signal to the CLI does not reach a container reliably.

Before ``run``, :meth:`ContainerRunner.pull_image` pulls the image when the engine lacks it
(``<engine> image inspect`` fails) or the task asks for ``force_pull_image``
(:class:`~stalwart.agent.images.EngineImages`); the daemon runs it in a thread of its own and
reports the seconds it took as ``ContainerStatus.pull_seconds``.

Environment values never appear on the command line (where ``ps`` shows them to every user):
the argv names each variable (``-e NAME``) and the CLI process carries the values.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from stalwart.agent.hooks import with_startup_hooks
from stalwart.agent.identity import IdentityError, TaskIdentity, resolve_run_as
from stalwart.agent.images import EngineImages
from stalwart.agent.protocol import DeviceType, TaskSpec
from stalwart.agent.runner import ContainerStartError, Handle, OutputSink, ProcessRunner
from stalwart.agent.workspace import Workspace, node_env

__all__ = [
    "CONTAINER_RUN_DIR",
    "CONTAINER_WORKDIR",
    "ContainerRunner",
    "container_env",
    "container_name",
    "docker_run_argv",
]

log = logging.getLogger(__name__)

Engine = Literal["docker", "podman"]

CONTAINER_RUN_DIR = "/run/determined"
CONTAINER_WORKDIR = "/run/determined/workdir"
SHM_SIZE = "4g"  # Determined's default shm_size_bytes (docker's own 64m breaks data loaders)
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_.-]")


def container_name(container_id: str) -> str:
    """The engine's container name for a Stalwart container id."""
    return "stalwart-" + _NAME_CHARS.sub("-", container_id)


def _device_flags(engine: Engine, device_type: DeviceType, slot_ids: Sequence[str]) -> list[str]:
    if device_type == "cuda" and slot_ids:
        if engine == "podman":  # CDI names from the NVIDIA container toolkit
            return [arg for i in slot_ids for arg in ("--device", f"nvidia.com/gpu={i}")]
        return ["--gpus", f'"device={",".join(slot_ids)}"']
    if device_type == "rocm":
        return ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video"]
    return []


def docker_run_argv(
    engine: Engine,
    *,
    image: str,
    argv: Sequence[str],
    env_names: Sequence[str],
    name: str,
    run_dir: Path,
    workdir: Path,
    device_type: DeviceType,
    slot_ids: Sequence[str],
    labels: Mapping[str, str],
    user: TaskIdentity | None = None,
) -> list[str]:
    """The ``<engine> run`` command line of one container (pure).

    Host network, the run directory at ``/run/determined`` and the workdir at
    ``/run/determined/workdir`` (also the working directory), GPUs by device index, the labels,
    ``--user UID:GID`` when ``user`` is given, and ``-e NAME`` for every variable (values come
    from the CLI's environment).
    """
    out = [engine, "run", "--rm", "--name", name, "--network", "host", "--shm-size", SHM_SIZE]
    if user is not None:
        out += ["--user", user.arg]
    for key, value in sorted(labels.items()):
        out += ["--label", f"{key}={value}"]
    out += ["-v", f"{run_dir}:{CONTAINER_RUN_DIR}", "-v", f"{workdir}:{CONTAINER_WORKDIR}"]
    out += ["-w", CONTAINER_WORKDIR]
    for env_name in sorted(env_names):
        out += ["-e", env_name]
    out += _device_flags(engine, device_type, slot_ids)
    return [*out, image, *argv]


def container_env(spec: TaskSpec, *, master_url: str, agent_id: str) -> dict[str, str]:
    """The environment inside the container: ``TaskSpec.env`` plus the node's variables with
    the container's paths. CUDA GPUs are chosen by the engine; ROCm ones by variable."""
    env = dict(spec.env)
    if spec.device_type == "rocm":
        env["ROCR_VISIBLE_DEVICES"] = ",".join(spec.slot_ids)
    env.update(
        node_env(
            master_url=master_url,
            agent_id=agent_id,
            run_dir=CONTAINER_RUN_DIR,
            workdir=CONTAINER_WORKDIR,
        )
    )
    return env


class ContainerRunner(ProcessRunner):
    """Runs each container with ``docker`` or ``podman`` (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        *,
        master_url: str,
        agent_id: str,
        images: EngineImages | None = None,
    ) -> None:
        self.engine: Engine = engine
        self.master_url = master_url
        self.agent_id = agent_id
        self.images = images or EngineImages(engine)
        self._helpers: list[subprocess.Popen[bytes]] = []

    def needs_image(self, spec: TaskSpec) -> bool:
        return bool(spec.image)

    def pull_image(self, spec: TaskSpec, sink: OutputSink) -> float | None:
        """Pull the image when the engine lacks it, or always with ``force_pull_image``."""
        if not spec.image:
            raise ContainerStartError(f"{self.engine}: the task names no image")
        return self.images.ensure(
            spec.image, force=spec.force_pull_image, sink=sink, auth=spec.registry_auth
        )

    def identity(self, spec: TaskSpec) -> TaskIdentity | None:
        """None: the engine switches users inside the container (see :meth:`command`)."""
        return None

    def command(
        self, spec: TaskSpec, workspace: Workspace, identity: TaskIdentity | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """``<engine> run``; a task whose owner is linked to an agent user runs as that user
        inside the container (others run as the image's user, isolated by the container)."""
        if not spec.image:
            raise ContainerStartError(f"{self.engine}: the task names no image")
        try:
            user = resolve_run_as(spec.run_as) if spec.run_as is not None else None
        except IdentityError as exc:
            raise ContainerStartError(str(exc)) from None
        inside = container_env(spec, master_url=self.master_url, agent_id=self.agent_id)
        (workspace.run_dir / "workdir").mkdir(exist_ok=True)  # the nested mount point
        argv = docker_run_argv(
            self.engine,
            image=spec.image,
            argv=with_startup_hooks(spec.argv, workspace.run_dir, workspace.workdir),
            env_names=list(inside),
            name=container_name(spec.container_id),
            run_dir=workspace.run_dir,
            workdir=workspace.workdir,
            device_type=spec.device_type,
            slot_ids=spec.slot_ids,
            labels={
                "ai.stalwart.agent": self.agent_id,
                "ai.stalwart.allocation": spec.allocation_id,
                "ai.stalwart.rank": str(spec.rank),
                "ai.stalwart.container": spec.container_id,
            },
            user=user,
        )
        return argv, {**workspace.env, **inside}

    def kill_leftovers(self, timeout: float = 60.0) -> list[str]:
        """Kill the containers an earlier life of this agent left running (labelled with this
        agent's id), as :func:`~stalwart.agent.runner.kill_leftovers` does for processes: a
        restarted agent does not adopt them and the master reschedules their trials, so each
        could only be a second copy. Returns their names; an engine that cannot list them is
        logged and nothing is killed."""
        listed = self._engine(
            "ps",
            "--filter",
            f"label=ai.stalwart.agent={self.agent_id}",
            "--format",
            "{{.Names}}",
            timeout=timeout,
        )
        names = sorted(line.strip() for line in listed.splitlines() if line.strip())
        if names:
            self._engine("kill", "--signal", "KILL", *names, timeout=timeout)
        return names

    def _engine(self, *args: str, timeout: float) -> str:
        """Run ``<engine> ARGS``; its stdout ('' when it could not run or failed: logged)."""
        try:
            done = subprocess.run(
                [self.engine, *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("%s %s failed: %s", self.engine, args[0], exc)
            return ""
        if done.returncode != 0:
            log.warning("%s %s failed: %s", self.engine, args[0], done.stderr.strip()[-500:])
            return ""
        return done.stdout

    def handle_name(self, spec: TaskSpec) -> str:
        return container_name(spec.container_id)

    def terminate(self, handle: Handle) -> None:
        self._engine_kill(handle, "TERM")

    def kill(self, handle: Handle) -> None:
        self._engine_kill(handle, "KILL")
        super().kill(handle)

    def _engine_kill(self, handle: Handle, signame: str) -> None:
        if handle.exit_seen is not None:
            return
        self._helpers = [helper for helper in self._helpers if helper.poll() is None]
        try:
            helper = subprocess.Popen(
                [self.engine, "kill", "--signal", signame, handle.name],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            return
        self._helpers.append(helper)
