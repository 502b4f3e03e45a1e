"""SIGKILL a trial's process (not its agent): restarts from the latest checkpoint, then errors.

A trial whose process dies restarts from its latest acknowledged checkpoint, up to
``max_restarts`` times; past that the trial is ERROR and the experiment's other trials go on to
complete. The reports of a killed run beyond its checkpoint are superseded, so each step is
stored once.
"""

from __future__ import annotations

import re

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.reliability.conftest import Pids, experiment_config, steady_files, steps

GRID = "  name: grid\n  metric: loss\n  max_concurrent_trials: 2"


def _acked_checkpoints(logs: str) -> list[int]:
    return [int(n) for n in re.findall(r"checkpointed step (\d+)", logs)]


def test_sigkilled_trial_restarts_from_its_checkpoint_then_errors(
    local: LocalCluster, api: Api, pids: Pids
) -> None:
    local.start_agent("a1", slots=2)
    hp = (
        f"  steps: 60\n  period: 4\n  sleep: 0.05\n  pid_dir: {pids.root}\n"
        "  x:\n    type: categorical\n    vals: [0.1, 0.9]"
    )
    exp_id = api.create_experiment(experiment_config(GRID, hp, max_restarts="1"), steady_files())
    trials = api.wait_until(
        lambda: (t := api.trials(exp_id)) and len(t) == 2 and t, timeout=30, what="two trials"
    )
    victim, survivor = sorted(t["id"] for t in trials)

    # run 1: killed once it has acknowledged two checkpoints
    api.wait_until(
        lambda: len(_acked_checkpoints(api.logs(victim))) >= 2, timeout=60, what="checkpoints"
    )
    pids.kill(victim, 1)
    acked = max(_acked_checkpoints(api.logs(victim)))
    api.wait_until(lambda: 2 in pids.runs(victim), timeout=30, what="the restarted run")
    logs = api.wait_until(
        lambda: (text := api.logs(victim)) and "resumed from step" in text and text,
        timeout=30,
        what="the resumed run",
    )
    resumed = int(re.findall(r"resumed from step (\d+)", logs)[0])
    assert resumed >= acked  # never from an older checkpoint than the last acknowledged one
    assert "restarting from its latest checkpoint (restart 1 of 1)" in logs

    # run 2: killed too; max_restarts is 1, so the trial errors
    pids.kill(victim, 2)
    api.wait_until(
        lambda: next(t for t in api.trials(exp_id) if t["id"] == victim)["state"] == "STATE_ERROR",
        timeout=30,
        what="the victim to error",
    )
    assert next(t for t in api.trials(exp_id) if t["id"] == survivor)["state"] != "STATE_ERROR"

    # the experiment goes on: the other trial completes
    exp = api.wait_state(exp_id, timeout=90)
    by_id = {t["id"]: t for t in api.trials(exp_id)}
    assert by_id[survivor]["state"] == "STATE_COMPLETED"
    assert steps(api, survivor) == list(range(1, 61))
    assert by_id[victim]["state"] == "STATE_ERROR"
    assert by_id[victim]["restarts"] == 1
    assert sorted(pids.runs(victim)) == [1, 2]  # no third run
    assert sorted(pids.runs(survivor)) == [1]  # the other trial was never touched
    assert "has used its 1 restarts: ERROR" in api.logs(victim)
    # each step of the victim is stored once: run 1's reports past the checkpoint run 2 resumed
    # from were superseded
    victim_steps = steps(api, victim)
    assert victim_steps == list(range(1, len(victim_steps) + 1)), victim_steps
    assert len(victim_steps) > resumed
    assert exp["state"] == "STATE_COMPLETED"  # one errored trial does not fail the search
