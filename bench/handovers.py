"""``python -m bench handovers``: where a B1 handover's time goes, stage by stage (issue 25).

Runs B1's Stalwart part (:func:`bench.b1._stalwart`: ``--trials`` Core API trials of 1 s on 16
slots, 320 by default) with ``STALWART_TRACE_HANDOVERS`` set for the master and the agent
(:mod:`stalwart.handovers`), then pairs each trial with the one that next ran on its slot (from
the master's database: the containers' slots) and prints, for every step between two stages,
the mean, p50 and p90 over those handovers: from the ended trial's last line (its own stamp,
after its report) through the stages of both allocations to the successor's first line (its
stamp, before any import). A stage an allocation passed twice counts at its first time (a
start is sent by the sync that recorded the placement and again by a later one). Steps that
overlap come out negative (the master records an exit inside the sync it received; the
successor's first line comes before the agent's spawn call returns).

A queued successor (placed behind the ended trial, claimed before it exited:
``cluster.queue_successors``) is started by the agent at the exit, so its handover is the ended
trial's last line, its exit, and the successor's own prepare, spawn and first line; the steps
of each kind of handover are printed apart (``queued:``, ``round trip:``), then the whole
handover over both.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from bench.b1 import SLOTS, _stalwart, stamped_spans
from bench.common import percentile
from stalwart.handovers import ENV, STAGES

__all__ = ["Step", "run", "steps"]

_ENDED = STAGES[: STAGES.index("master.claimed")]
_SUCCESSOR = STAGES[len(_ENDED) :]
_QUEUED = STAGES[STAGES.index("agent.prepare") :]
"""A queued successor's own stages after its predecessor's exit (its claim and start came
before: ``cluster.queue_successors``)."""


@dataclass(frozen=True)
class Step:
    """From one stage to the next, over every handover that passed both (milliseconds)."""

    name: str
    count: int
    mean_ms: float
    p50_ms: float
    p90_ms: float


def _first_times(trace: Path) -> dict[str, dict[str, float]]:
    """allocation id -> stage -> the first time it was marked."""
    times: dict[str, dict[str, float]] = defaultdict(dict)
    for line in trace.read_text(encoding="utf-8").splitlines():
        stamp, stage, allocation_id = line.split()
        times[allocation_id].setdefault(stage, float(stamp))
    return times


def _successions(
    db: Path, spans: Mapping[int, tuple[float, float]]
) -> list[tuple[str, int, str, int]]:
    """(ended allocation, its trial, successor allocation, its trial) for each slot's
    consecutive trials, in start order."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select a.id, t.id, c.slot_ids from allocations a "
            "join trials t on t.task_id = a.task_id "
            "join containers c on c.allocation_id = a.id"
        ).fetchall()
    by_slot: dict[str, list[tuple[float, str, int]]] = defaultdict(list)
    for allocation_id, trial_id, slot_ids in rows:
        if trial_id in spans:
            slot = json.loads(slot_ids)[0]
            by_slot[slot].append((spans[trial_id][0], allocation_id, trial_id))
    pairs = []
    for runs in by_slot.values():
        runs.sort()
        for (_, ended, ended_trial), (_, successor, successor_trial) in pairwise(runs):
            pairs.append((ended, ended_trial, successor, successor_trial))
    return pairs


def steps(db: Path, stamps: Path, trace: Path) -> list[Step]:
    """The handover steps of a traced B1 run: its master's database, the trials' stamp
    directory and the trace file (see the module docstring); the last is the whole handover."""
    spans = stamped_spans(stamps)
    times = _first_times(trace)
    samples: dict[str, list[float]] = defaultdict(list)
    for ended, ended_trial, successor, successor_trial in _successions(db, spans):
        mine, next_ = times[ended], times[successor]
        queued = next_.get("master.claimed", 0.0) < mine.get("agent.exit", 0.0)
        chain = [("trial.last_line", spans[ended_trial][1])]
        if queued:  # placed behind the ended one: the agent starts it at the exit
            chain += [("agent.exit", mine["agent.exit"])]
            chain += [(s, next_[s]) for s in _QUEUED if s in next_]
        else:
            chain += [(s, mine[s]) for s in _ENDED if s in mine]
            chain += [(s, next_[s]) for s in _SUCCESSOR if s in next_]
        chain.append(("trial.first_line", spans[successor_trial][0]))
        kind = "queued" if queued else "round trip"
        for (before, t0), (after, t1) in pairwise(chain):
            samples[f"{kind}: {before} -> {after}"].append((t1 - t0) * 1e3)
        whole = (spans[successor_trial][0] - spans[ended_trial][1]) * 1e3
        samples[f"{kind}: whole handover"].append(whole)
        samples["whole handover"].append(whole)
    out = []
    kinds = ("queued:", "round trip:")
    for name, values in sorted(  # each kind's steps in handover order, then the whole
        samples.items(),
        key=lambda item: next(
            (i for i, k in enumerate(kinds) if item[0].startswith(k)), len(kinds)
        ),
    ):
        ordered = sorted(values)
        out.append(
            Step(
                name=name,
                count=len(ordered),
                mean_ms=sum(ordered) / len(ordered),
                p50_ms=percentile(ordered, 0.5),
                p90_ms=percentile(ordered, 0.9),
            )
        )
    return out


def run(trials: int = 320, workdir: Path | None = None) -> list[Step]:
    """Run B1's Stalwart part traced (in ``workdir``, kept, or a temporary directory, removed)
    and print the steps."""
    with tempfile.TemporaryDirectory(prefix="bench-handovers-") as scratch:
        work = workdir or Path(scratch)
        trace = work / "handovers.trace"
        trace.unlink(missing_ok=True)
        before = os.environ.get(ENV)
        os.environ[ENV] = str(trace)
        try:
            result = _stalwart(trials, work)
        finally:
            if before is None:
                del os.environ[ENV]
            else:
                os.environ[ENV] = before
        found = steps(work / "home" / "master.db", work / "stamps", trace)
    floor = trials / SLOTS
    print(
        f"{trials} trials on {SLOTS} slots: {result['wall_s']:.1f} s, "
        f"{(result['wall_s'] - floor) / floor * 100:.1f} % over the {floor:g} s floor"
    )
    print(f"{'step':70} {'count':>5} {'mean':>8} {'p50':>8} {'p90':>8}")
    for step in found:
        print(
            f"{step.name:70} {step.count:5d} {step.mean_ms:7.1f}ms {step.p50_ms:7.1f}ms "
            f"{step.p90_ms:7.1f}ms"
        )
    return found
