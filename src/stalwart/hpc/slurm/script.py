"""Write an allocation's sbatch script.

Contract: :func:`render_sbatch_script` is pure and deterministic (same request, same text).
The script:

- names the job ``stalwart-<allocation id>`` and writes stdout/stderr to
  ``<job_storage_root>/<allocation id>/slurm-<job id>.out|.err`` (appending across requeues) with
  that directory as the working directory; the caller creates the directory before ``sbatch``;
- requests ``nodes = ceil(slots / slots_per_node)`` nodes with one task (launcher) per node, the
  GPUs per node (``--gpus-per-node``, or ``--gres=gpu`` where TRES is unsupported, or the total
  ``--gpus`` for an uneven split) or CPUs per node (``--cpus-per-task``);
- is requeueable only when the request says so (trials resume from their checkpoint);
- appends the experiment's sbatch_args last (validated by
  :func:`~stalwart.hpc.slurm.args.sbatch_directives`; forbidden ones raise
  :class:`~stalwart.hpc.errors.SchedulerArgsError`);
- exports the request's environment and ``exec``\\ s ``srun`` on every node with the command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import timedelta

from stalwart.hpc.errors import SchedulerArgsError
from stalwart.hpc.layout import BatchRequest, Layout, plan_layout
from stalwart.hpc.slurm.args import sbatch_directives

__all__ = ["SlurmOptions", "format_time_limit", "render_sbatch_script"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class SlurmOptions:
    """Cluster-wide choices from the master config.

    ``tres_supported``: ``select/cons_tres`` (``--gpus-per-node``, ``--gpus``);
    ``gres_supported``: GPUs can be requested at all (``--gres=gpu`` without TRES).
    """

    tres_supported: bool = True
    gres_supported: bool = True
    srun: str = "srun"


def format_time_limit(limit: timedelta) -> str:
    """Slurm's ``D-HH:MM:SS``, rounded up to whole seconds; at least one second."""
    total = max(1, int(-(-limit.total_seconds() // 1)))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"


def _gpu_options(request: BatchRequest, layout: Layout, options: SlurmOptions) -> list[str]:
    if request.slot_type == "cpu" or request.slots == 0:
        return []
    typed = f"{request.gpu_type}:" if request.gpu_type else ""
    if not options.gres_supported:
        raise SchedulerArgsError(
            f"allocation {request.allocation_id}",
            [f"{request.slots} {request.slot_type} slots requested, but the cluster has no GRES"],
        )
    if layout.total_gpus is not None:
        return [f"--gpus={typed}{layout.total_gpus}"]
    if options.tres_supported:
        return [f"--gpus-per-node={typed}{layout.gpus_per_node}"]
    return [f"--gres=gpu:{typed}{layout.gpus_per_node}"]


def render_sbatch_script(request: BatchRequest, options: SlurmOptions | None = None) -> str:
    """The batch script for ``request``; SchedulerArgsError when it cannot be built."""
    options = options or SlurmOptions()
    layout = plan_layout(request, total_gpus_supported=options.tres_supported)
    user = sbatch_directives(request.scheduler_args)
    bad_env = [name for name, _ in request.env if not _ENV_NAME.match(name)]
    if bad_env:
        raise SchedulerArgsError(
            f"allocation {request.allocation_id}",
            [f"environment variable name {name!r} is not valid" for name in bad_env],
        )

    job_dir = request.job_dir
    resources = [f"--nodes={layout.nodes}", "--ntasks-per-node=1"]
    gpus = _gpu_options(request, layout, options)
    resources += gpus
    step = ["--ntasks-per-node=1", "--kill-on-bad-exit=1", *gpus]
    if layout.cpus_per_node:
        resources.append(f"--cpus-per-task={layout.cpus_per_node}")
        step.append(f"--cpus-per-task={layout.cpus_per_node}")
    own = [
        f"--job-name={request.job_name}",
        *([f"--partition={request.partition}"] if request.partition else []),
        *resources,
        *([f"--exclude={','.join(request.exclude_nodes)}"] if request.exclude_nodes else []),
        *([f"--time={format_time_limit(request.time_limit)}"] if request.time_limit else []),
        f"--output={job_dir}/slurm-%j.out",
        f"--error={job_dir}/slurm-%j.err",
        f"--chdir={job_dir}",
        "--requeue" if request.requeue else "--no-requeue",
        "--open-mode=append",
    ]
    if request.preemption_warning:
        seconds = max(1, int(request.preemption_warning.total_seconds()))
        own.append(f"--signal=TERM@{seconds}")

    lines = ["#!/bin/bash", f"# Stalwart allocation {request.allocation_id}"]
    lines += [f"#SBATCH {quote_directive(opt)}" for opt in own]
    if user:
        lines.append("# slurm.sbatch_args")
        lines += user
    lines += ["set -euo pipefail", f"export STALWART_ALLOCATION_ID={request.allocation_id}"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in request.env]
    lines.append(
        'echo "stalwart: Slurm job ${SLURM_JOB_ID} (restart ${SLURM_RESTART_COUNT:-0}) on '
        '${SLURM_JOB_NODELIST}"'
    )
    srun = shlex.join([options.srun, *step, "--", *request.command])
    lines.append(f"exec {srun}")
    return "\n".join(lines) + "\n"


def quote_directive(option: str) -> str:
    """Quote the value of ``--name=value`` for an ``#SBATCH`` line when it holds whitespace."""
    name, sep, value = option.partition("=")
    if sep and (" " in value or "\t" in value):
        return f'{name}="{value}"'
    return option
