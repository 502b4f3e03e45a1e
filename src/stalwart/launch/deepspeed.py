"""``python3 -m stalwart.launch.deepspeed [[DS_OVERRIDES...] --] SCRIPT...``: run a training
script under DeepSpeed's launcher across a trial's containers (Determined's
``determined.launch.deepspeed``, same command line).

Contract:

- It runs inside a task, as :mod:`.torch_distributed` does (exit 2 elsewhere), once in each
  container of the trial, with at least one slot per container. Determined's version runs the
  ``deepspeed`` runner on the chief only, which starts the other nodes over ssh (pdsh) while they
  run sshd; Stalwart's agents give tasks no ssh, so every container instead ``exec``\\ s the
  per-node launcher that the runner would have started there over ssh::

      python -u -m deepspeed.launcher.launch --world_info <base64 JSON> --node_rank <container
        rank> --master_addr <chief> --master_port $C10D_PORT --no_local_rank [DS_OVERRIDES...]
        --module stalwart.launch.wrap_rank SCRIPT...

  ``--world_info`` lists every container's slots, in container order (``container-<i>``:
  device ids), so global ranks follow the containers and rank 0 is in container 0, whose address
  (``127.0.0.1`` with one container) is the chief's. DeepSpeed sets ``CUDA_VISIBLE_DEVICES`` of
  the workers to this container's ids: the entries of ``CUDA_VISIBLE_DEVICES`` when it names one
  device per slot (so the agent's choice of devices stands), else ``0..slots-1``.
- The hostfile of the allocation (``<address> slots=<n>`` per container, ``localhost`` with one
  container) is written to ``$DET_RUN_DIR/hostfile-<allocation>.txt`` (the temporary directory
  without ``DET_RUN_DIR``); ``DET_DEEPSPEED_HOSTFILE_PATH`` names it. Every worker also gets
  ``DET_CHIEF_IP`` and ``USE_DEEPSPEED=1``, and DeepSpeed's ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``LOCAL_SIZE``, ``CROSS_RANK``, ``CROSS_SIZE``, ``MASTER_ADDR`` and
  ``MASTER_PORT``: ``DistributedContext.from_deepspeed()`` and ``deepspeed.init_distributed()``
  work unchanged. As with Determined, the script gets no ``--local_rank`` argument.
- DS_OVERRIDES (options of ``deepspeed.launcher.launch``, such as ``--bind_cores_to_rank``) are
  recognized only when the command line starts with an option and they end with ``--``; a
  script's own ``--`` passes through. SCRIPT and ``--trial`` are as in :mod:`.torch_distributed`;
  each worker's output lines carry ``[rank=N] `` (:mod:`.wrap_rank`). DeepSpeed must be
  installed in the task's Python; without it the launcher exits 2 saying so.
- Failures: DeepSpeed's launcher checks its workers every second; when one fails it stops the
  others (SIGTERM, SIGKILL after 30 s) and exits with that worker's status, which becomes the
  container's; the master then stops the trial's other containers. Signals reach it directly.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stalwart.core import env as task_env
from stalwart.launch._common import (
    LaunchError,
    Plan,
    current_task,
    exec_command,
    fail,
    parse_command,
    plan_for,
    script_argv,
)

__all__ = [
    "Cluster",
    "cluster_for",
    "deepspeed_argv",
    "hostfile_text",
    "local_device_ids",
    "main",
    "parse_args",
    "world_info",
]

LAUNCHER = "deepspeed"


@dataclass(frozen=True)
class Cluster:
    """The containers of the trial as DeepSpeed sees them."""

    plan: Plan
    addrs: tuple[str, ...]
    slot_counts: tuple[int, ...]


def cluster_for(env: task_env.TaskEnv) -> Cluster:
    """The trial's containers and this one's place (:class:`LaunchError` when unusable)."""
    plan = plan_for(env, LAUNCHER)
    rendezvous = env.rendezvous
    if rendezvous is None:
        return Cluster(plan, ("127.0.0.1",), (plan.nproc_per_node,))
    addrs, counts = rendezvous.container_addrs, rendezvous.container_slot_counts
    if len(counts) != len(addrs) or counts[plan.node_rank] != plan.nproc_per_node:
        raise LaunchError(
            f"rendezvous.json is inconsistent: slot counts {list(counts)} for containers "
            f"{list(addrs)}, {plan.nproc_per_node} slots in container {plan.node_rank}"
        )
    if min(counts) < 1:
        raise LaunchError(
            f"deepspeed needs at least one slot per container, got slot counts {list(counts)}"
        )
    return Cluster(plan, tuple(addrs), tuple(counts))


def hostfile_text(cluster: Cluster) -> str:
    """The allocation's hostfile: ``<address> slots=<n>`` per container (``localhost`` alone)."""
    hosts = ["localhost"] if len(cluster.addrs) == 1 else list(cluster.addrs)
    return "".join(
        f"{host} slots={n}\n" for host, n in zip(hosts, cluster.slot_counts, strict=True)
    )


def local_device_ids(slots: int, environ: Mapping[str, str] | None = None) -> list[int | str]:
    """This container's device ids for DeepSpeed: ``CUDA_VISIBLE_DEVICES``'s entries when it
    names ``slots`` devices, else ``0..slots-1``."""
    env = os.environ if environ is None else environ
    visible = [entry.strip() for entry in env.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    if len(visible) == slots and all(visible):
        return [int(entry) if entry.isdigit() else entry for entry in visible]
    return list(range(slots))


def world_info(cluster: Cluster, local_ids: Sequence[int | str]) -> str:
    """``--world_info``: base64 (URL-safe) JSON of ``{"container-<i>": [device ids]}`` in
    container order; only this container's ids are used by DeepSpeed, the others count slots."""
    info = {
        f"container-{i}": list(local_ids) if i == cluster.plan.node_rank else list(range(n))
        for i, n in enumerate(cluster.slot_counts)
    }
    return base64.urlsafe_b64encode(json.dumps(info).encode()).decode()


def deepspeed_argv(
    plan: Plan,
    world: str,
    overrides: Sequence[str],
    script: Sequence[str],
    python: str = sys.executable,
) -> list[str]:
    """The ``deepspeed.launcher.launch`` command of this container (module contract)."""
    return [
        python,
        "-u",
        "-m",
        "deepspeed.launcher.launch",
        "--world_info",
        world,
        "--node_rank",
        str(plan.node_rank),
        "--master_addr",
        plan.master_addr,
        "--master_port",
        str(plan.master_port),
        "--no_local_rank",
        *overrides,
        "--module",
        "stalwart.launch.wrap_rank",
        *script,
    ]


def parse_args(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """``(deepspeed overrides, legacy trial or None, script)`` of the command line."""
    return parse_command(
        argv,
        launcher=LAUNCHER,
        description="Launch a script under DeepSpeed's launcher across a trial's containers.",
        overrides="DS_OVERRIDES",
        overrides_first=True,
    )


def write_hostfile(env: task_env.TaskEnv, text: str) -> Path:
    """Write the hostfile (module contract), atomically; its path."""
    folder = env.run_dir if env.run_dir is not None else Path(tempfile.gettempdir())
    path = folder / f"hostfile-{env.allocation_id}.txt"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text)
        partial.replace(path)
    except OSError as exc:
        raise LaunchError(f"cannot write the hostfile {path}: {exc}") from exc
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Build the command and ``exec`` it (returns only on error: 2)."""
    try:
        overrides, trial, script = parse_args(sys.argv[1:] if argv is None else argv)
        env = current_task(LAUNCHER, "run the `deepspeed` launcher yourself")
        cluster = cluster_for(env)
        worker = script_argv(script, trial)
        if importlib.util.find_spec("deepspeed") is None:
            raise LaunchError(
                f"DeepSpeed is not installed in this task's Python ({sys.executable}): use an "
                "image with it, or `pip install deepspeed` in the startup hook"
            )
        world = world_info(cluster, local_device_ids(cluster.plan.nproc_per_node))
        command = deepspeed_argv(cluster.plan, world, overrides, worker)
        hostfile = write_hostfile(env, hostfile_text(cluster))
    except (LaunchError, task_env.TaskEnvError) as exc:
        return fail(LAUNCHER, exc)
    return exec_command(
        LAUNCHER,
        command,
        {
            "DET_CHIEF_IP": cluster.plan.chief_ip,
            "USE_DEEPSPEED": "1",
            "DET_DEEPSPEED_HOSTFILE_PATH": str(hostfile),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
