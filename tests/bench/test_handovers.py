"""``python -m bench handovers`` on a real master and agent: every handover of a traced B1 run
passes every stage the master and the agent mark, in order, and the steps add up to the
whole handover."""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path

import pytest
from bench.b1 import SLOTS
from bench.handovers import run

from stalwart.handovers import ENV, STAGES


def test_a_traced_run_accounts_for_every_handover_stage_by_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second wave's 16 handovers, each of its kind: queued (the successor was placed
    behind the trial before it exited and the agent started it at the exit: most, with
    ``cluster.queue_successors`` on by default) or round trip (the master placed it after the
    exit); each kind's steps add up to its whole handover."""
    found = {step.name: step for step in run(2 * SLOTS, tmp_path)}
    chains = {
        "queued": ["trial.last_line", "agent.exit", *STAGES[STAGES.index("agent.prepare") :]],
        "round trip": ["trial.last_line", *STAGES],
    }
    counts, seen = 0, []
    for kind, chain in chains.items():
        names = [f"{kind}: {a} -> {b}" for a, b in pairwise([*chain, "trial.first_line"])]
        if f"{kind}: whole handover" not in found:
            continue
        whole = found.pop(f"{kind}: whole handover")
        steps = [found.pop(name) for name in names]
        assert sum(s.mean_ms for s in steps) == pytest.approx(whole.mean_ms)
        counts += whole.count
        seen.append(kind)
    assert "queued" in seen
    assert counts == SLOTS
    whole = found.pop("whole handover")
    assert (whole.count, found) == (SLOTS, {})
    assert whole.mean_ms > 0
    assert "whole handover" in capsys.readouterr().out
    assert ENV not in os.environ  # restored: later masters in this process trace nothing
