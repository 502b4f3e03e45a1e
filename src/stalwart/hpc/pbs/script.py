"""Write an allocation's PBS (OpenPBS / PBS Pro) batch script, and check ``pbsbatch_args``.

Contract: pure and deterministic. The script:

- names the job ``stalwart-<allocation id>`` (PBS truncates names at 236 characters; ids are
  shorter), writes stdout/stderr to ``<job dir>/pbs.out|.err`` and ``cd``\\ s into the job dir;
- requests ``-l select=<nodes>:ncpus=<n>[:ngpus=<g>]:mpiprocs=1`` with ``-l place=scatter``
  (one launcher per node), ``nodes = ceil(slots / slots_per_node)``; PBS has no job-wide GPU
  count, so an uneven split asks ``ceil(slots / nodes)`` GPUs on every node;
- is rerunnable (``-r y``) only when the request says so;
- appends the experiment's ``pbsbatch_args`` last, after :func:`pbs_directives` rejected the
  ones Stalwart owns (name, queue, output/error/join, rerun, arrays, ``select``/``nodes``/
  ``ncpus``/``ngpus``/``mpiprocs``/``place`` resources) in one
  :class:`~stalwart.hpc.errors.SchedulerArgsError`;
- runs the command directly on one node, or with ``pbsdsh -u`` once per node, the environment
  passed explicitly through ``env`` (pbsdsh does not forward the script's exports).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from stalwart.hpc.errors import SchedulerArgsError
from stalwart.hpc.layout import BatchRequest, plan_layout

__all__ = ["PbsOptions", "format_walltime", "pbs_directives", "render_qsub_script"]

_FORBIDDEN_FLAGS: dict[str, str] = {
    "N": "Stalwart names jobs after their allocation to track them",
    "q": "the queue is the resource pool: set resources.resource_pool",
    "o": "Stalwart collects the job's output under job_storage_root",
    "e": "Stalwart collects the job's output under job_storage_root",
    "j": "Stalwart collects the job's output under job_storage_root",
    "r": "Stalwart decides whether a job is rerun (trials are, commands are not)",
    "J": "job arrays cannot be tracked as one allocation",
}
_FORBIDDEN_RESOURCES: dict[str, str] = {
    "select": "nodes and devices come from resources.slots_per_trial and pbs.slots_per_node",
    "nodes": "nodes and devices come from resources.slots_per_trial and pbs.slots_per_node",
    "ncpus": "nodes and devices come from resources.slots_per_trial and pbs.slots_per_node",
    "ngpus": "nodes and devices come from resources.slots_per_trial and pbs.slots_per_node",
    "mpiprocs": "Stalwart runs one launcher per node",
    "place": "Stalwart places one launcher per node (place=scatter)",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class PbsOptions:
    """Cluster-wide choices: ``gpus``: the name of the GPU resource (``ngpus`` on PBS Pro)."""

    gpu_resource: str = "ngpus"
    pbsdsh: str = "pbsdsh"


def format_walltime(limit: timedelta) -> str:
    """PBS's ``HH:MM:SS`` (hours may exceed 24), rounded up; at least one second."""
    total = max(1, int(-(-limit.total_seconds() // 1)))
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}"


def _groups(args: Iterable[str]) -> tuple[list[list[str]], list[str]]:
    groups: list[list[str]] = []
    problems: list[str] = []
    for item in args:
        if "\n" in item or "\r" in item:
            problems.append(f"{item!r}: an argument cannot contain a line break")
            continue
        try:
            tokens = shlex.split(item)
        except ValueError as exc:
            problems.append(f"{item!r}: {exc}")
            continue
        for token in tokens:
            if token.startswith("-") and len(token) > 1:
                groups.append([token])
            elif groups:
                groups[-1].append(token)
            else:
                problems.append(f"{token!r} is not an option (options start with '-')")
    return groups, problems


def _check(group: list[str]) -> str | None:
    shown = " ".join(group)
    letter = group[0][1]
    if letter in _FORBIDDEN_FLAGS:
        return f"'{shown}' (-{letter}) is not allowed: {_FORBIDDEN_FLAGS[letter]}"
    if letter == "l":
        value = group[0][2:] or (group[1] if len(group) > 1 else "")
        for resource in value.split(","):
            name = resource.split("=", 1)[0].strip()
            if name in _FORBIDDEN_RESOURCES:
                return f"'{shown}' (-l {name}) is not allowed: {_FORBIDDEN_RESOURCES[name]}"
    return None


def pbs_directives(args: Iterable[str]) -> list[str]:
    """``#PBS`` lines for ``args``; SchedulerArgsError lists every forbidden option."""
    groups, problems = _groups(args)
    problems += [p for p in (_check(g) for g in groups) if p]
    if problems:
        raise SchedulerArgsError("pbs.pbsbatch_args", problems)
    return ["#PBS " + " ".join(shlex.quote(t) for t in g) for g in groups]


def render_qsub_script(request: BatchRequest, options: PbsOptions | None = None) -> str:
    """The qsub script for ``request``; SchedulerArgsError when it cannot be built."""
    options = options or PbsOptions()
    layout = plan_layout(request, total_gpus_supported=False)
    user = pbs_directives(request.scheduler_args)
    bad_env = [name for name, _ in request.env if not _ENV_NAME.match(name)]
    if bad_env:
        raise SchedulerArgsError(
            f"allocation {request.allocation_id}",
            [f"environment variable name {name!r} is not valid" for name in bad_env],
        )
    chunk = f"{layout.nodes}:ncpus={max(1, layout.cpus_per_node)}"
    if layout.gpus_per_node:
        chunk += f":{options.gpu_resource}={layout.gpus_per_node}"
    chunk += ":mpiprocs=1"
    job_dir = request.job_dir
    own = [
        f"-N {request.job_name}",
        *([f"-q {request.partition}"] if request.partition else []),
        f"-l select={chunk}",
        "-l place=scatter",
        *([f"-l walltime={format_walltime(request.time_limit)}"] if request.time_limit else []),
        f"-o {shlex.quote(str(job_dir / 'pbs.out'))}",
        f"-e {shlex.quote(str(job_dir / 'pbs.err'))}",
        f"-r {'y' if request.requeue else 'n'}",
    ]
    lines = ["#!/bin/bash", f"# Stalwart allocation {request.allocation_id}"]
    lines += [f"#PBS {opt}" for opt in own]
    if user:
        lines.append("# pbs.pbsbatch_args")
        lines += user
    env = [("STALWART_ALLOCATION_ID", request.allocation_id), *request.env]
    lines += ["set -euo pipefail", f"cd {shlex.quote(str(job_dir))}"]
    lines.append('echo "stalwart: PBS job ${PBS_JOBID} on $(sort -u "${PBS_NODEFILE}" | xargs)"')
    if layout.nodes == 1:
        lines += [f"export {name}={shlex.quote(value)}" for name, value in env]
        lines.append(f"exec {shlex.join(request.command)}")
    else:
        assignments = [f"{name}={value}" for name, value in env]
        argv = [options.pbsdsh, "-u", "--", "/usr/bin/env", *assignments, *request.command]
        lines.append(f"exec {shlex.join(argv)}")
    return "\n".join(lines) + "\n"
