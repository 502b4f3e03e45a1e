"""``python3 -m stalwart.launch.torch_distributed [TORCH_OVERRIDES... --] SCRIPT...``: run a
training script under ``torch.distributed.run`` across a trial's containers (Determined's
``determined.launch.torch_distributed``, same command line).

Contract:

- It runs inside a task (``DET_*`` variables, ``$DET_RUN_DIR/info/rendezvous.json``); elsewhere
  it exits 2 with a message. Each container of the trial runs it once. It replaces itself
  (``exec``) with::

      python -m torch.distributed.run --nnodes <containers> --nproc_per_node <slots here>
        --node_rank <container rank> --master_addr <chief> --master_port $C10D_PORT
        --rdzv_backend static --max_restarts 0 [TORCH_OVERRIDES...]
        --module stalwart.launch.wrap_rank SCRIPT...

  Static rendezvous (as Determined): node ranks are the container ranks, so the global rank 0
  is in container 0, whose address (``container_addrs[0]``; ``127.0.0.1`` with one container)
  is the chief's. Every worker gets ``DET_CHIEF_IP`` (that address) and
  ``USE_TORCH_DISTRIBUTED``, so ``DistributedContext.from_torch_distributed()`` finds the chief.
- SCRIPT is a command (``python3 train.py --lr 0.1``); a first word ending in ``.py`` is run
  with this Python. Each worker's output lines carry ``[rank=N] `` (:mod:`.wrap_rank`).
- ``--trial pkg.mod:Class`` (or a lone ``pkg.mod:Class``) is a legacy Trial class: it runs
  ``python3 -m determined.exec.harness pkg.mod:Class`` and needs the ``determined`` package;
  without it the launcher exits 2 saying so.
- Failures: ``--max_restarts 0`` makes torch stop every worker of the container when one fails
  and exit non-zero, which becomes the container's exit status; the master then stops the
  trial's other containers. Signals reach torch directly (no process in between).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from stalwart.core import env as task_env

__all__ = ["LaunchError", "Plan", "main", "parse_args", "plan_for", "script_argv", "torch_argv"]

LEGACY_TRIAL = re.compile(r"^[a-zA-Z0-9_.]+:[a-zA-Z0-9_]+$")
EXIT_USAGE = 2


class LaunchError(Exception):
    """The launcher cannot start (outside a task, no slots, no ``determined`` for a legacy
    Trial...); its message is printed and the launcher exits 2."""


@dataclass(frozen=True)
class Plan:
    """Where this container's workers sit in the trial."""

    nnodes: int
    nproc_per_node: int
    node_rank: int
    master_addr: str
    master_port: int
    chief_ip: str


def plan_for(env: task_env.TaskEnv) -> Plan:
    """The plan of the container described by ``env`` (:class:`LaunchError` when unusable)."""
    rendezvous = env.rendezvous
    addrs = list(rendezvous.container_addrs) if rendezvous is not None else ["127.0.0.1"]
    rank = rendezvous.container_rank if rendezvous is not None else 0
    if not addrs or not 0 <= rank < len(addrs):
        raise LaunchError(f"rendezvous.json is inconsistent: rank {rank} of {addrs}")
    if not env.slot_ids:
        raise LaunchError(
            "torch_distributed needs at least one slot per container (DET_SLOT_IDS is empty): "
            "set resources.slots_per_trial"
        )
    chief = "127.0.0.1" if len(addrs) == 1 else addrs[0]
    return Plan(
        nnodes=len(addrs),
        nproc_per_node=len(env.slot_ids),
        node_rank=rank,
        master_addr=chief,
        master_port=env.ports.c10d,
        chief_ip=chief,
    )


def torch_argv(
    plan: Plan, overrides: Sequence[str], script: Sequence[str], python: str = sys.executable
) -> list[str]:
    """The ``torch.distributed.run`` command of ``plan`` (module contract)."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(plan.nnodes),
        "--nproc_per_node",
        str(plan.nproc_per_node),
        "--node_rank",
        str(plan.node_rank),
        "--master_addr",
        plan.master_addr,
        "--master_port",
        str(plan.master_port),
        "--rdzv_backend",
        "static",
        "--max_restarts",
        "0",
        *overrides,
        "--module",
        "stalwart.launch.wrap_rank",
        *script,
    ]


def script_argv(
    script: Sequence[str], trial: str | None, python: str = sys.executable
) -> list[str]:
    """The command each worker runs (module contract); :class:`LaunchError` for a legacy Trial
    without the ``determined`` package."""
    if trial is None and len(script) == 1 and LEGACY_TRIAL.match(script[0]):
        trial = script[0]
        script = []
    if trial is not None:
        if script:
            raise LaunchError(f"extra arguments after --trial {trial}: {list(script)}")
        if importlib.util.find_spec("determined") is None:
            raise LaunchError(
                f"the entrypoint {trial!r} is a legacy Trial class, which runs on Determined's "
                f"own harness: install the `determined` package in this task's Python "
                f"({python}), or turn the trial into a Core API script "
                "(`with stalwart.core.init(...)`) and launch `python3 train.py`"
            )
        return [python, "-m", "determined.exec.harness", trial]
    if not script:
        raise LaunchError("no script to launch: give a command such as `python3 train.py`")
    if script[0].endswith(".py"):
        return [python, *script]
    return list(script)


def parse_args(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """``(torch overrides, legacy trial or None, script)`` of the command line."""
    args = list(argv)
    overrides: list[str] = []
    if "--" in args:
        split = args.index("--")
        overrides, args = args[:split], args[split + 1 :]
    parser = argparse.ArgumentParser(
        prog="python3 -m stalwart.launch.torch_distributed",
        usage="%(prog)s [[TORCH_OVERRIDES...] --] (--trial TRIAL)|(SCRIPT...)",
        description="Launch a script under torch.distributed.run across a trial's containers.",
        epilog="TORCH_OVERRIDES go to torch.distributed.run after the launcher's own arguments "
        "(so they win); when given, they end with `--`.",
    )
    parser.add_argument("--trial", help="a legacy Trial class (pkg.mod:Class)")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="the command to launch")
    parsed = parser.parse_args(args)
    return overrides, parsed.trial, list(parsed.script)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the command and ``exec`` it (returns only on error: 2)."""
    try:
        overrides, trial, script = parse_args(sys.argv[1:] if argv is None else argv)
        env = task_env.current()
        if env is None:
            raise LaunchError(
                "stalwart.launch.torch_distributed runs inside a trial's task (DET_MASTER and "
                "DET_ALLOCATION_ID are not set); off-cluster, run torchrun yourself"
            )
        plan = plan_for(env)
        command = torch_argv(plan, overrides, script_argv(script, trial))
    except (LaunchError, task_env.TaskEnvError) as exc:
        print(f"stalwart.launch.torch_distributed: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    os.environ["DET_CHIEF_IP"] = plan.chief_ip
    os.environ["USE_TORCH_DISTRIBUTED"] = "True"
    print(f"torch_distributed: {' '.join(command)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execv(command[0], command)
    return EXIT_USAGE  # not reached


if __name__ == "__main__":
    sys.exit(main())
