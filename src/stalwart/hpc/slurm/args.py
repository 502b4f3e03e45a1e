"""Validate the experiment's ``slurm.sbatch_args`` and turn them into ``#SBATCH`` lines.

Contract: :func:`sbatch_directives` is pure. It accepts options the way users write them
(``--mem=10G``, ``--mem 10G``, ``["--mem", "10G"]``, ``-t 60``, ``-t60``), rejects every option
that would change what Stalwart allocates or where it looks for the job (nodes, tasks, GPUs,
partition, output/error files, working directory, requeueing, job name, arrays) in any of its
spellings (long, ``=`` form, short, attached short value, unambiguous long-option prefixes such
as ``--part``), and raises one :class:`~stalwart.hpc.errors.SchedulerArgsError` listing every
problem with what to use instead. ``--gres`` is rejected only when it asks for GPUs.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from stalwart.hpc.errors import SchedulerArgsError

__all__ = ["FORBIDDEN_LONG", "FORBIDDEN_SHORT", "sbatch_directives", "split_sbatch_args"]

# Long option -> why Stalwart owns it (the message tells the user what to do instead).
FORBIDDEN_LONG: dict[str, str] = {
    "nodes": "the node count comes from resources.slots_per_trial and slurm.slots_per_node",
    "ntasks": "Stalwart runs one launcher per node",
    "ntasks-per-node": "Stalwart runs one launcher per node",
    "gpus": "GPUs come from resources.slots_per_trial (and slurm.gpu_type)",
    "gpus-per-node": "GPUs come from resources.slots_per_trial and slurm.slots_per_node",
    "gpus-per-task": "GPUs come from resources.slots_per_trial and slurm.slots_per_node",
    "gpus-per-socket": "GPUs come from resources.slots_per_trial and slurm.slots_per_node",
    "partition": "the partition is the resource pool: set resources.resource_pool",
    "output": "Stalwart collects the job's output under job_storage_root",
    "error": "Stalwart collects the job's output under job_storage_root",
    "chdir": "the working directory is the allocation's directory under job_storage_root",
    "requeue": "Stalwart decides whether a job is requeued (trials are, commands are not)",
    "no-requeue": "Stalwart decides whether a job is requeued (trials are, commands are not)",
    "job-name": "Stalwart names jobs after their allocation to track them",
    "array": "job arrays cannot be tracked as one allocation",
    "wrap": "Stalwart writes the batch script",
    "open-mode": "Stalwart appends to the job's output across requeues",
}

# Short option letter -> its long name.
FORBIDDEN_SHORT: dict[str, str] = {
    "N": "nodes",
    "n": "ntasks",
    "G": "gpus",
    "p": "partition",
    "o": "output",
    "e": "error",
    "D": "chdir",
    "J": "job-name",
    "a": "array",
}

# sbatch short options that take no value (they may be bundled: ``-vQ``).
_SHORT_FLAGS = frozenset("hHIkOQsuvVW")

# Long options that are prefixes of forbidden ones but are real, allowed sbatch options.
_ALLOWED_LONG = frozenset(
    {"no-kill", "nice", "ntasks-per-core", "ntasks-per-socket", "ntasks-per-gpu"}
)


def split_sbatch_args(args: Iterable[str]) -> list[list[str]]:
    """Group ``args`` into options: each group is an option token and its separate values.

    Every item is split shell-style first (``"--mem 10G"`` is two tokens); a token that does not
    start with ``-`` belongs to the option before it. A leading value raises SchedulerArgsError.
    """
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
            if token.startswith("-") and token not in ("-", "--"):
                groups.append([token])
            elif groups:
                groups[-1].append(token)
            else:
                problems.append(f"{token!r} is not an option (options start with '-')")
    if problems:
        raise SchedulerArgsError("slurm.sbatch_args", problems)
    return groups


def _forbidden_long(name: str) -> str | None:
    """The forbidden long option ``name`` stands for (exactly or as a getopt prefix), or None."""
    if name in FORBIDDEN_LONG:
        return name
    if name in _ALLOWED_LONG or len(name) < 2:
        return None
    matches = [full for full in FORBIDDEN_LONG if full.startswith(name)]
    return min(matches, key=len) if matches else None


def _check(group: Sequence[str]) -> str | None:
    token = group[0]
    if token.startswith("--"):
        name, _, value = token[2:].partition("=")
        if not value and len(group) > 1:
            value = group[1]
        if name == "gres" or (len(name) >= 3 and "gres".startswith(name)):
            if any(part.split(":", 1)[0] == "gpu" for part in value.split(",")):
                return (
                    f"'{' '.join(group)}': GPUs come from resources.slots_per_trial "
                    "(and slurm.gpu_type); other GRES are fine"
                )
            return None
        full = _forbidden_long(name)
        if full is None:
            return None
        spelled = "" if full == name else f" (--{name} means --{full})"
        return f"'{' '.join(group)}'{spelled} is not allowed: {FORBIDDEN_LONG[full]}"
    for letter in token[1:]:
        if letter in FORBIDDEN_SHORT:
            full = FORBIDDEN_SHORT[letter]
            shown = " ".join(group)
            return f"'{shown}' (-{letter} is --{full}) is not allowed: {FORBIDDEN_LONG[full]}"
        if letter not in _SHORT_FLAGS:
            return None  # the rest of the token is this option's value
    return None


def _directive(group: Sequence[str]) -> str:
    if any(" " in t or "\t" in t or '"' in t for t in group):
        quoted = [t if not (" " in t or "\t" in t) else _quote(t) for t in group]
        return "#SBATCH " + " ".join(quoted)
    return "#SBATCH " + " ".join(group)


def _quote(token: str) -> str:
    # Slurm reads quoted values in #SBATCH lines; quote the value part of --opt=value.
    if token.startswith("--") and "=" in token:
        name, _, value = token.partition("=")
        return f'{name}="{value}"'
    return f'"{token}"'


def sbatch_directives(args: Iterable[str]) -> list[str]:
    """``#SBATCH`` lines for ``args``; SchedulerArgsError lists every forbidden option."""
    groups = split_sbatch_args(args)
    problems = [p for p in (_check(g) for g in groups) if p]
    quotes = [g for g in groups if any('"' in t for t in g)]
    problems += [f"'{' '.join(g)}': a value cannot contain a double quote" for g in quotes]
    if problems:
        raise SchedulerArgsError("slurm.sbatch_args", problems)
    return [_directive(g) for g in groups]
