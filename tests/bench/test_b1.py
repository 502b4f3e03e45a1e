"""B1's Stalwart side on a real master and agent: the Core API trial runs, stamps its span and
is counted; the peers chosen for a run."""

from __future__ import annotations

from pathlib import Path

from bench.b1 import SLOTS, _peers, _stalwart
from bench.common import Options


def test_stalwarts_b1_trials_run_the_harness_and_stamp_their_spans(tmp_path: Path) -> None:
    result = _stalwart(2 * SLOTS, tmp_path)
    assert result["experiment_state"] == "STATE_COMPLETED"
    assert result["errors"] == 0
    assert result["stamped"] == 2 * SLOTS
    assert result["gap"]["count"] == SLOTS  # every end but the last wave's has a next start
    assert result["wall_s"] >= 2.0  # two waves of 1 s trials


def test_rays_actor_per_trial_is_left_out_of_big_runs_unless_asked_for() -> None:
    assert _peers(Options(), 1000) == ("ray_tune", "ray_tune_reuse", "optuna")
    assert _peers(Options(), 10_000) == ("ray_tune_reuse", "optuna")
    assert _peers(Options(peers=("ray_tune",)), 10_000) == ("ray_tune",)
