"""``python3 -m stalwart.launch.horovod [[HVD_OVERRIDES...] --] SCRIPT...``: run a training
script under ``horovodrun`` (TensorFlow or PyTorch images with Horovod; Determined's
``determined.launch.horovod``, same command line).

Contract:

- It runs inside a task, as :mod:`.torch_distributed` does (exit 2 elsewhere), with at least
  one slot, in a trial of **one container**: ``horovodrun`` starts the workers of other hosts
  over ssh (Determined runs sshd in every container for it), and Stalwart's agents give tasks no
  ssh, so a trial of several containers exits 2 with a message (use :mod:`.torch_distributed`
  or :mod:`.deepspeed` there, or fit the trial on one agent). It ``exec``\\ s::

      python -m stalwart.launch.wrap_rank --no-rank --strip <horovod's tag> --
        horovodrun -np <slots> -H localhost:<slots> --start-timeout 1200
        --gloo-timeout-seconds 240 <tensor fusion arguments> [HVD_OVERRIDES...]
        python -m stalwart.launch.wrap_rank --rank-env HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK
        -- SCRIPT...

  No ``--`` before the worker's command: ``horovodrun`` would keep it as the command's first
  word (Horovod 0.28's argument parser).

  The tensor fusion arguments come from the experiment's ``optimizations`` as in Determined:
  ``--autotune --autotune-log-file /tmp/autotune_log.csv`` with ``auto_tune_tensor_fusion``,
  else ``--fusion-threshold-mb <tensor_fusion_threshold> --cycle-time-ms
  <tensor_fusion_cycle_time>`` (64 and 5 by default); then ``--cache-capacity 1024
  --no-hierarchical-allreduce --no-hierarchical-allgather``.
- Each worker's output lines carry ``[rank=N] `` (N from Horovod's or MPI's rank variable), and
  the outer :mod:`.wrap_rank` removes the tag ``horovodrun`` puts before them (``[0]<stdout>:``
  with Gloo, ``[1,0]<stdout>:`` with Open MPI), so the lines start with the rank prefix the agent
  reads. Every worker gets ``DET_CHIEF_IP`` and ``USE_HOROVOD=1``
  (``DistributedContext.from_horovod(hvd)`` after ``hvd.init()``). SCRIPT and ``--trial`` are
  as in :mod:`.torch_distributed`. ``horovodrun`` must be on ``PATH``; without it the launcher
  exits 2 saying so.
- Failures: ``horovodrun`` (Gloo, not elastic) stops the other workers when one fails and exits
  non-zero. Signals to the container reach the outer :mod:`.wrap_rank`, which passes them to
  ``horovodrun``'s process group once; if it is killed, ``horovodrun`` is killed with it.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any

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

__all__ = ["TAG", "horovod_argv", "main", "parse_args", "performance_args", "plan_one_container"]

LAUNCHER = "horovod"
START_TIMEOUT_S = 1200
GLOO_TIMEOUT_S = 240
AUTOTUNE_LOG = "/tmp/autotune_log.csv"
RANK_VARIABLES = "HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK"
TAG = r"(?:\[\d+(?:,\d+)?\]<std(?:out|err)>:|\[\d+\] )(?=\[rank=\d+\] )"
"""``horovodrun``'s tag in front of a worker's line (Gloo: ``[0]<stdout>:``; Open MPI:
``[1,0]<stdout>:``; MPICH: ``[0] ``), removed only where a rank prefix follows it."""


def plan_one_container(env: task_env.TaskEnv) -> Plan:
    """This container's plan (:class:`LaunchError` for a trial of several containers)."""
    plan = plan_for(env, LAUNCHER)
    if plan.nnodes > 1:
        raise LaunchError(
            f"horovod runs a trial in one container, this one has {plan.nnodes}: horovodrun "
            "reaches other hosts over ssh, which Stalwart's agents do not provide; use "
            "stalwart.launch.torch_distributed or stalwart.launch.deepspeed, or ask for no more "
            "slots than one agent has (resources.slots_per_trial)"
        )
    return plan


def performance_args(optimizations: Mapping[str, Any]) -> list[str]:
    """The tensor fusion arguments of the experiment's ``optimizations`` (module contract)."""
    if optimizations.get("auto_tune_tensor_fusion"):
        args = ["--autotune", "--autotune-log-file", AUTOTUNE_LOG]
    else:
        args = [
            "--fusion-threshold-mb",
            str(optimizations.get("tensor_fusion_threshold", 64)),
            "--cycle-time-ms",
            str(optimizations.get("tensor_fusion_cycle_time", 5)),
        ]
    return [
        *args,
        "--cache-capacity",
        "1024",
        "--no-hierarchical-allreduce",
        "--no-hierarchical-allgather",
    ]


def horovod_argv(
    plan: Plan,
    optimizations: Mapping[str, Any],
    overrides: Sequence[str],
    script: Sequence[str],
    *,
    horovodrun: str = "horovodrun",
    python: str = sys.executable,
) -> list[str]:
    """The command of ``plan`` (module contract)."""
    wrap = [python, "-m", "stalwart.launch.wrap_rank"]
    slots = str(plan.nproc_per_node)
    return [
        *wrap,
        "--no-rank",
        "--strip",
        TAG,
        "--",
        horovodrun,
        "-np",
        slots,
        "-H",
        f"localhost:{slots}",
        "--start-timeout",
        str(START_TIMEOUT_S),
        "--gloo-timeout-seconds",
        str(GLOO_TIMEOUT_S),
        *performance_args(optimizations),
        *overrides,
        *wrap,
        "--rank-env",
        RANK_VARIABLES,
        "--",
        *script,
    ]


def parse_args(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """``(horovodrun overrides, legacy trial or None, script)`` of the command line."""
    return parse_command(
        argv,
        launcher=LAUNCHER,
        description="Launch a script under horovodrun in a trial's container.",
        overrides="HVD_OVERRIDES",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Build the command and ``exec`` it (returns only on error: 2)."""
    try:
        overrides, trial, script = parse_args(sys.argv[1:] if argv is None else argv)
        env = current_task(LAUNCHER, "run horovodrun yourself")
        plan = plan_one_container(env)
        worker = script_argv(script, trial)
        horovodrun = shutil.which("horovodrun")
        if horovodrun is None:
            raise LaunchError(
                "horovodrun is not on PATH: use an image with Horovod installed (built for the "
                "image's TensorFlow or PyTorch)"
            )
        config = env.trial.config if env.trial is not None else {}
        optimizations = config.get("optimizations") or {}
        command = horovod_argv(plan, optimizations, overrides, worker, horovodrun=horovodrun)
    except (LaunchError, task_env.TaskEnvError) as exc:
        return fail(LAUNCHER, exc)
    return exec_command(LAUNCHER, command, {"DET_CHIEF_IP": plan.chief_ip, "USE_HOROVOD": "1"})


if __name__ == "__main__":
    sys.exit(main())
