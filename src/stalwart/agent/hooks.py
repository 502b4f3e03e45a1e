"""Startup hooks: shell scripts sourced by bash before a task's command, as Determined does.

Contract (every engine: the agent's processes and containers, Slurm/PBS and Kubernetes pods all
start tasks through :meth:`stalwart.agent.runner.ProcessRunner.command` or its container
variant, which call :func:`with_startup_hooks`):

- Two hooks, in Determined's order: the configured one (``task_container_defaults.startup_hook``
  of the task's resource pool, else the master's; written by the agent to
  ``$DET_RUN_DIR/dynamic-tcd-startup-hook.sh``), then ``startup-hook.sh`` of the model
  definition or of a command's ``-c`` directory (in the working directory). Both are optional.
- They are **sourced** by one ``bash`` with ``set -e`` that then ``exec``\\ s the command: what a
  hook exports (``export PATH=...``, ``source venv/bin/activate``) is the command's
  environment, and the command keeps the task's pid, signals and exit code.
- A failing command in a hook ends the task with that command's exit code, before the task's
  command runs, and the task's log gets :data:`FAILED_LINE` naming the hook. A hook that calls
  ``exit`` ends the task the same way.
- A task with neither hook runs its command unchanged (no bash needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "CONFIGURED_HOOK",
    "CONTEXT_HOOK",
    "FAILED_LINE",
    "has_startup_hooks",
    "with_startup_hooks",
]

CONFIGURED_HOOK = "dynamic-tcd-startup-hook.sh"
"""The configured hook's file in the run directory (Determined's name)."""
CONTEXT_HOOK = "startup-hook.sh"
"""The model definition's hook, in the working directory (Determined's name)."""
FAILED_LINE = (
    "stalwart: the startup hook {hook} failed with exit code {code}: the task's command did "
    "not run. Fix the hook (or remove it) and run the task again."
)
"""The line a failing hook leaves in the task's log (``{hook}``, ``{code}`` filled by bash)."""

_SCRIPT = f"""\
__stalwart_hook=
__stalwart_failed() {{
  __stalwart_rc=$?
  if [ -n "$__stalwart_hook" ]; then
    printf "%s\\n" "{FAILED_LINE.format(hook="$__stalwart_hook", code="$__stalwart_rc")}" >&2
  fi
}}
trap __stalwart_failed EXIT
set -e
if [ -f "$DET_RUN_DIR/{CONFIGURED_HOOK}" ]; then
  __stalwart_hook="task_container_defaults.startup_hook"
  printf "%s\\n" "stalwart: sourcing the startup hook $__stalwart_hook" >&2
  source "$DET_RUN_DIR/{CONFIGURED_HOOK}"
fi
if [ -f {CONTEXT_HOOK} ]; then
  __stalwart_hook="{CONTEXT_HOOK}"
  printf "%s\\n" "stalwart: sourcing the startup hook $__stalwart_hook" >&2
  source ./{CONTEXT_HOOK}
fi
__stalwart_hook=
trap - EXIT
set +e
exec "$@"
"""


def has_startup_hooks(run_dir: Path, workdir: Path) -> bool:
    """Whether a task whose directories (as the agent sees them) are these has a hook."""
    return (run_dir / CONFIGURED_HOOK).is_file() or (workdir / CONTEXT_HOOK).is_file()


def with_startup_hooks(argv: Sequence[str], run_dir: Path, workdir: Path) -> list[str]:
    """``argv`` run after the task's hooks (see the module contract); ``argv`` itself when it
    has none. The hooks are found through ``$DET_RUN_DIR`` and the working directory at run
    time, so the same command works inside containers and mount namespaces."""
    if not argv or not has_startup_hooks(run_dir, workdir):
        return list(argv)
    return ["bash", "-c", _SCRIPT, "stalwart-startup", *argv]
