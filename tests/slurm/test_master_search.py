"""A hyperparameter search through the master's Slurm resource manager, on the real Slurm:
adaptive_asha runs every trial as its own batch job, stops some early, and completes."""

from __future__ import annotations

from pathlib import Path

import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import trial_files
from tests.slurm.masters import job_ids, steps, trial_config

pytestmark = pytest.mark.usefixtures("real_slurm")

ASHA = (
    "  name: adaptive_asha\n  metric: loss\n  smaller_is_better: true\n"
    "  time_metric: batches\n  max_time: 8\n  max_trials: 4\n  max_concurrent_trials: 2\n"
    "  divisor: 4\n  max_rungs: 2\n  mode: aggressive"
)


def test_adaptive_asha_runs_to_completion_on_slurm(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, job_root = slurm_master
    # Early stopping reaches a trial asynchronously (the searcher acts on a validation, the
    # trial sees it at its next preemption check, as in Determined 0.38), so each step takes
    # long enough that a stopped trial cannot run to the end first on a busy machine.
    hp = "  steps: 8\n  period: 1\n  sleep: 0.5\n"
    hp += "  x:\n    type: double\n    minval: 0\n    maxval: 1"
    # Seed 3 samples x = 0.69, 0.42, 0.94, 0.64 for trials 1-4 in creation order: the third
    # is worse at the first rung than both trials before it, whichever of those reports first,
    # so it is stopped there. (With random seeds, about 1 search in 12 promotes every trial.)
    config = trial_config(hp, searcher=ASHA, reproducibility="{experiment_seed: 3}")
    exp_id = api.create_experiment(config, trial_files("train.py"))
    exp = api.wait_state(exp_id, timeout=300)
    trials = api.trials(exp_id)
    assert exp["state"] == "STATE_COMPLETED", [api.logs(t["id"])[-2000:] for t in trials]
    assert len(trials) == 4
    assert all(t["state"] == "STATE_COMPLETED" for t in trials)
    lengths = {t["id"]: max(steps(api, t["id"])) for t in trials}
    xs = sorted(round(float(t["hparams"]["x"]), 2) for t in trials)
    assert xs == [0.42, 0.64, 0.69, 0.94], xs  # what the seed samples
    assert any(n < 8 for n in lengths.values()), lengths  # stopped early by the searcher
    assert any(n == 8 for n in lengths.values()), lengths  # someone trained to the end
    best = min(trials, key=lambda t: t["bestValidation"]["metrics"]["avgMetrics"]["loss"])
    assert api.experiment(exp_id)["bestTrialId"] == best["id"]
    # Every trial ran as (at least) one Slurm job of its own, and none is left behind.
    assert len([p for p in job_root.iterdir() if p.is_dir()]) >= 4
    assert all("submitted as Slurm job" in api.logs(t["id"]) for t in trials)
    api.wait_until(lambda: not job_ids(job_root), timeout=30, what="the jobs to leave squeue")
