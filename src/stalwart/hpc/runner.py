"""Running workload-manager commands: the one place that starts processes.

Contract: a :class:`Runner` runs one argv (no shell) with a timeout and returns its
:class:`CommandResult`; it never raises for a non-zero exit (callers decide what an exit means)
but returns ``returncode=None`` when the command could not start or timed out. The clients take
a runner, so tests pass :class:`ReplayRunner` with captured outputs instead of Slurm.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["CommandResult", "ReplayRunner", "Runner", "SubprocessRunner"]


@dataclass(frozen=True)
class CommandResult:
    """What a command did. ``returncode`` None: it could not be started or ran out of time."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """The command exited 0."""
        return self.returncode == 0


class Runner(Protocol):
    """Runs an argv and returns its result (see the module docstring)."""

    def __call__(self, argv: Sequence[str], *, timeout: float) -> CommandResult: ...


class SubprocessRunner:
    """Runs commands with :func:`subprocess.run`; ``env`` (if given) replaces the environment."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(env) if env is not None else None

    def __call__(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Run ``argv``; a missing executable or a timeout gives ``returncode=None``."""
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env=self.env,
            )
        except FileNotFoundError as exc:
            return CommandResult(tuple(argv), None, "", f"{argv[0]}: {exc.strerror}")
        except subprocess.TimeoutExpired:
            return CommandResult(tuple(argv), None, "", f"{argv[0]}: timed out after {timeout}s")
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)


@dataclass
class ReplayRunner:
    """A fake runner for tests: answers by command name, records every call.

    ``answers`` maps a command name (``"squeue"``) to a result, or to a function of the argv
    that returns one; an unknown command fails with exit status 127.
    """

    answers: dict[str, CommandResult | Callable[[Sequence[str]], CommandResult]] = field(
        default_factory=dict
    )
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        """Record ``argv`` and answer it."""
        self.calls.append(tuple(argv))
        answer = self.answers.get(argv[0])
        if answer is None:
            return CommandResult(tuple(argv), 127, "", f"{argv[0]}: command not found")
        if callable(answer):
            return answer(argv)
        return answer

    def reply(self, name: str, stdout: str = "", stderr: str = "", returncode: int = 0) -> None:
        """Answer ``name`` with this output from now on."""
        self.answers[name] = CommandResult((name,), returncode, stdout, stderr)

    def count(self, name: str) -> int:
        """How many times ``name`` was run."""
        return sum(1 for call in self.calls if call[0] == name)
