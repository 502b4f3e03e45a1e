"""Errors of the HPC (Slurm, PBS) layer.

Contract: every error here is a :class:`~stalwart.errors.StalwartError` with a stable ``code``.
:class:`SchedulerArgsError` is the user's to fix (their ``sbatch_args``/``pbsbatch_args`` or
resources); :class:`HpcCommandError` is a workload-manager command that failed, with
``retryable`` telling the caller whether trying again later may help (the controller did not
answer) or not (Slurm rejected the job).
"""

from __future__ import annotations

from collections.abc import Sequence

from stalwart.errors import InvalidArgumentError, StalwartError

__all__ = ["HpcCommandError", "SchedulerArgsError"]


class SchedulerArgsError(InvalidArgumentError):
    """A batch job cannot be built: forbidden or malformed scheduler arguments, impossible sizes.

    ``problems`` holds one line per problem; the message lists them all.
    """

    code = "invalid_scheduler_args"

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        count = len(problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{source}: {count} {noun}:\n" + "\n".join(f"  {p}" for p in problems))
        self.source = source
        self.problems = list(problems)


# Fragments of Slurm/PBS error messages that mean "the controller is busy or unreachable".
_TRANSIENT = (
    "socket timed out",
    "unable to contact slurm controller",
    "slurm_load_jobs error: slurm controller",
    "connection refused",
    "temporarily unavailable",
    "try again",
    "communication failure",
    "cannot connect to server",
)


class HpcCommandError(StalwartError):
    """A workload-manager command (sbatch, squeue, qsub...) exited non-zero or could not run.

    ``argv``, ``returncode`` (None: it could not be started or timed out) and ``stderr`` are
    kept for logs; the message is the command name and the last line of its error output, which
    is what Slurm puts its reason in (``sbatch: error: Invalid partition name specified``).
    """

    code = "hpc_command_failed"

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str) -> None:
        lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit status {returncode}"
        name = argv[0].rsplit("/", 1)[-1] if argv else "command"
        prefix = f"{name}: "
        text = detail if detail.startswith(prefix) else prefix + detail
        super().__init__(text)
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr

    @property
    def retryable(self) -> bool:
        """True when the failure looks transient (controller down or busy, command timed out)."""
        if self.returncode is None:
            return True
        low = self.stderr.lower()
        return any(fragment in low for fragment in _TRANSIENT)
