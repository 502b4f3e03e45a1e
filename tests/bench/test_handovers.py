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
    found = {step.name: step for step in run(2 * SLOTS, tmp_path)}
    chain = ["trial.last_line", *STAGES, "trial.first_line"]
    names = [f"{a} -> {b}" for a, b in pairwise(chain)]
    assert list(found) == [*names, "whole handover"]
    assert {step.count for step in found.values()} == {SLOTS}  # the second wave's 16
    whole = found.pop("whole handover")
    assert whole.mean_ms > 0
    assert sum(step.mean_ms for step in found.values()) == pytest.approx(whole.mean_ms)
    assert "whole handover" in capsys.readouterr().out
    assert ENV not in os.environ  # restored: later masters in this process trace nothing
