"""The launcher's task runner when tasks run in containers (``container_run_type`` other than
``none``): the agent's :class:`~stalwart.agent.runner.ProcessRunner` with the task's command
wrapped by :func:`~stalwart.hpc.containers.task_argv`.

Contract:

- :func:`runner_from_environ` reads what the batch script exports
  (:data:`RUN_TYPE_VAR`, :data:`CACHE_DIR_VAR`, :data:`BINDS_VAR`, ``:``-separated) and returns a
  plain ``ProcessRunner`` for ``none`` (or nothing set), else a :class:`ContainerTaskRunner`.
- :class:`ContainerTaskRunner` runs the spec's ``image`` from its cached file when that file
  exists (``stalwart envs precache`` made it), else from its source (the tool pulls it: slow;
  the task's logs say so). A missing tool or a task without an image fails the start with a
  :class:`~stalwart.agent.runner.ContainerStartError` that says what to do.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath

from stalwart.agent.identity import TaskIdentity
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.runner import ContainerStartError, ProcessRunner
from stalwart.agent.workspace import Workspace
from stalwart.hpc.containers import (
    CONTAINER_RUN_TYPES,
    ContainerRunType,
    cached_image,
    task_argv,
    tool_of,
)

__all__ = [
    "BINDS_VAR",
    "CACHE_DIR_VAR",
    "RUN_TYPE_VAR",
    "ContainerTaskRunner",
    "container_env",
    "runner_from_environ",
]

RUN_TYPE_VAR = "STALWART_CONTAINER_RUN_TYPE"
CACHE_DIR_VAR = "STALWART_IMAGE_CACHE_DIR"
BINDS_VAR = "STALWART_CONTAINER_BINDS"


def container_env(
    run_type: ContainerRunType, cache_dir: PurePosixPath | None, binds: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    """The variables a batch script exports for :func:`runner_from_environ` (none: nothing)."""
    if run_type == "none":
        return ()
    out = [(RUN_TYPE_VAR, run_type), (BINDS_VAR, ":".join(b for b in binds if b))]
    if cache_dir is not None:
        out.append((CACHE_DIR_VAR, str(cache_dir)))
    return tuple(out)


class ContainerTaskRunner(ProcessRunner):
    """Runs each task inside its image (see the module docstring)."""

    def __init__(
        self,
        run_type: ContainerRunType,
        *,
        cache_dir: PurePosixPath | None = None,
        binds: Sequence[str] = (),
        which: Callable[[str], str | None] = shutil.which,
        exists: Callable[[str], bool] = os.path.exists,
    ) -> None:
        super().__init__()
        self.run_type = run_type
        self.cache_dir = cache_dir
        self.binds = tuple(binds)
        self.which = which
        self.exists = exists

    def command(
        self, spec: TaskSpec, workspace: Workspace, identity: TaskIdentity | None = None
    ) -> tuple[list[str], dict[str, str]]:
        argv, env = super().command(spec, workspace, identity)
        tool = tool_of(self.run_type)
        if tool is None:
            return argv, env
        if self.which(tool) is None:
            raise ContainerStartError(
                f"container_run_type is {self.run_type}, but `{tool}` is not installed on this "
                "node: install it on the compute nodes, or set resource_manager."
                "container_run_type to one they have (none: no container)"
            )
        if not spec.image:
            raise ContainerStartError(
                "the task names no image: set environment.image in the experiment config"
            )
        cached = cached_image(self.run_type, spec.image, self.cache_dir)
        image = spec.image
        if cached is not None and self.exists(str(cached)):
            image = str(cached)
        elif cached is not None:
            with workspace.stderr_path.open("a", encoding="utf-8") as stream:
                stream.write(
                    f"stalwart: {spec.image} is not cached at {cached}: {tool} pulls it now "
                    "(run `stalwart envs precache` ahead of time to skip this)\n"
                )
        wrapped = task_argv(
            self.run_type,
            argv,
            image=image,
            slot_type=spec.device_type,
            workdir=str(workspace.workdir),
            run_dir=str(workspace.run_dir),
            binds=self.binds,
            env_names=env.keys(),
        )
        return wrapped, env


def runner_from_environ(environ: Mapping[str, str]) -> ProcessRunner:
    """The runner the batch script asked for (see the module docstring)."""
    run_type = environ.get(RUN_TYPE_VAR, "none") or "none"
    if run_type not in CONTAINER_RUN_TYPES:
        raise ValueError(
            f"{RUN_TYPE_VAR}={run_type!r} is not one of {', '.join(CONTAINER_RUN_TYPES)}"
        )
    if run_type == "none":
        return ProcessRunner()
    cache = environ.get(CACHE_DIR_VAR)
    binds = [b for b in environ.get(BINDS_VAR, "").split(":") if b]
    return ContainerTaskRunner(
        run_type,
        cache_dir=PurePosixPath(cache) if cache else None,
        binds=binds,
    )
