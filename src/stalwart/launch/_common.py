"""What the launchers share: where this container sits in the trial (:class:`Plan`), the command
each worker runs (:func:`script_argv`), the command line (:func:`parse_command`) and the ``exec``
at the end (:func:`exec_command`)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stalwart.core import env as task_env

__all__ = [
    "EXIT_USAGE",
    "LEGACY_TRIAL",
    "LaunchError",
    "Plan",
    "current_task",
    "exec_command",
    "parse_command",
    "plan_for",
    "script_argv",
]

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


def plan_for(env: task_env.TaskEnv, launcher: str = "torch_distributed") -> Plan:
    """The plan of the container described by ``env`` (:class:`LaunchError` when unusable)."""
    rendezvous = env.rendezvous
    addrs = list(rendezvous.container_addrs) if rendezvous is not None else ["127.0.0.1"]
    rank = rendezvous.container_rank if rendezvous is not None else 0
    if not addrs or not 0 <= rank < len(addrs):
        raise LaunchError(f"rendezvous.json is inconsistent: rank {rank} of {addrs}")
    if not env.slot_ids:
        raise LaunchError(
            f"{launcher} needs at least one slot per container (DET_SLOT_IDS is empty): "
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


def script_argv(
    script: Sequence[str], trial: str | None, python: str = sys.executable
) -> list[str]:
    """The command each worker runs: SCRIPT (a first word ending in ``.py`` runs with
    ``python``), or Determined's harness for a legacy Trial class; :class:`LaunchError` for a
    legacy Trial without the ``determined`` package."""
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


def parse_command(
    argv: Sequence[str],
    *,
    launcher: str,
    description: str,
    overrides: str,
    overrides_first: bool = False,
) -> tuple[list[str], str | None, list[str]]:
    """``(overrides, legacy trial or None, script)`` of ``[[OVERRIDES...] --] (--trial
    TRIAL)|(SCRIPT...)``. The overrides end at the first ``--``; with ``overrides_first``, only
    when the command line starts with an option other than ``--trial`` (so a script's own
    ``--`` passes through, as with Determined's launchers that take no overrides)."""
    args = list(argv)
    extra: list[str] = []
    if "--" in args and (not overrides_first or (args[0].startswith("-") and args[0] != "--trial")):
        split = args.index("--")
        extra, args = args[:split], args[split + 1 :]
    parser = argparse.ArgumentParser(
        prog=f"python3 -m stalwart.launch.{launcher}",
        usage=f"%(prog)s [[{overrides}...] --] (--trial TRIAL)|(SCRIPT...)",
        description=description,
        epilog=f"{overrides} go to the launcher after Stalwart's own arguments (so they win); "
        "when given, they end with `--`.",
    )
    parser.add_argument("--trial", help="a legacy Trial class (pkg.mod:Class)")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="the command to launch")
    parsed = parser.parse_args(args)
    return extra, parsed.trial, list(parsed.script)


def current_task(launcher: str, off_cluster: str) -> task_env.TaskEnv:
    """This process's task environment; :class:`LaunchError` outside a task (``off_cluster``
    says what to do instead)."""
    env = task_env.current()
    if env is None:
        raise LaunchError(
            f"stalwart.launch.{launcher} runs inside a trial's task (DET_MASTER and "
            f"DET_ALLOCATION_ID are not set); off-cluster, {off_cluster}"
        )
    return env


def fail(launcher: str, exc: Exception) -> int:
    """Print why ``launcher`` cannot start; :data:`EXIT_USAGE`."""
    print(f"stalwart.launch.{launcher}: {exc}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def exec_command(launcher: str, command: Sequence[str], environ: Mapping[str, str]) -> int:
    """Set ``environ`` in this process's environment, print ``command`` and ``exec`` it (so
    signals reach it directly). Returns only if the ``exec`` fails (:data:`EXIT_USAGE`)."""
    os.environ.update(environ)
    print(f"{launcher}: {' '.join(command)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    try:
        os.execv(command[0], list(command))
    except OSError as exc:
        return fail(launcher, LaunchError(f"cannot run {command[0]!r}: {exc}"))
    return EXIT_USAGE  # not reached
