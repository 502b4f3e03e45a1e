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

import sys
from collections.abc import Sequence

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

__all__ = ["LaunchError", "Plan", "main", "parse_args", "plan_for", "script_argv", "torch_argv"]

LAUNCHER = "torch_distributed"


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


def parse_args(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """``(torch overrides, legacy trial or None, script)`` of the command line."""
    return parse_command(
        argv,
        launcher=LAUNCHER,
        description="Launch a script under torch.distributed.run across a trial's containers.",
        overrides="TORCH_OVERRIDES",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Build the command and ``exec`` it (returns only on error: 2)."""
    try:
        overrides, trial, script = parse_args(sys.argv[1:] if argv is None else argv)
        env = current_task(LAUNCHER, "run torchrun yourself")
        plan = plan_for(env, LAUNCHER)
        command = torch_argv(plan, overrides, script_argv(script, trial))
    except (LaunchError, task_env.TaskEnvError) as exc:
        return fail(LAUNCHER, exc)
    return exec_command(
        LAUNCHER, command, {"DET_CHIEF_IP": plan.chief_ip, "USE_TORCH_DISTRIBUTED": "True"}
    )


if __name__ == "__main__":
    sys.exit(main())
