"""Handover traces: where the time goes between one trial's end and the start of the trial
that takes its slot (``python -m bench handovers``; docs/benchmarks.md, B1).

With ``STALWART_TRACE_HANDOVERS`` set to a file path in the environment of the master and of
the agent (read once, when this module is imported), each appends one line per stage an
allocation passes: ``<unix time> <stage> <allocation id>``. Unset, the default, :func:`mark`
returns at once; callers that must work to name the allocations check :data:`ON` first. Each
call is one ``write`` to a file opened with ``O_APPEND``, so the lines of the master and the
agent interleave whole.

The stages, in the order a handover passes them (:data:`STAGES`): the agent sees the ended
trial's process exit, has its last lines in hand (the exit can be reported), sends the sync
that reports it; the master receives that sync, records the exit, ends the allocation in a
round, and in a later placement claims slots for the successor's allocation, which a sync
answer carries to the agent as a start; the agent receives it, prepares the workspace, and
spawns the process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Final

__all__ = ["ENV", "ON", "STAGES", "mark"]

ENV: Final = "STALWART_TRACE_HANDOVERS"
_PATH: Final = os.environ.get(ENV) or None
ON: Final = _PATH is not None
"""Whether this process traces handovers (``STALWART_TRACE_HANDOVERS`` was set at import)."""

STAGES: Final = (
    "agent.exit",
    "agent.exit_ready",
    "agent.sync_sent",
    "master.sync_received",
    "master.exit_recorded",
    "master.allocation_ended",
    "master.claimed",
    "master.start_sent",
    "agent.start_received",
    "agent.prepare",
    "agent.spawn",
    "agent.spawned",
)
"""The stages, in handover order: the first six are the ended allocation's, the others its
successor's."""


def mark(stage: str, allocation_ids: Iterable[str]) -> None:
    """Append a ``stage`` line for each of ``allocation_ids``, stamped now (no-op when off)."""
    if _PATH is None:
        return
    now = time.time()
    text = "".join(f"{now:.6f} {stage} {a}\n" for a in allocation_ids)
    if not text:
        return
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
