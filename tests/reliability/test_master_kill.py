"""SIGKILL the master during an adaptive_asha search, at several points, and restart it.

Extends ``tests/integration/test_experiments.py::test_master_sigkill_loses_no_metric_report``
(one kill of a single trial) to a search: the master dies right after its first trials are
created, while trials report metrics, and once the searcher has moved on to later trials. After
each restart the experiment carries on, and at the end:

- it has exactly ``max_trials`` trials, each with distinct hyperparameters (the searcher, which
  commits its state with the trials it creates, did not create any twice);
- every trial ran exactly once (one pid file, ``restarts`` 0): the running trials were never
  killed by the master's death;
- every step of every trial is stored exactly once, in both groups, and so is every
  checkpoint (``period: 1``: each step reports a validation and a checkpoint, so the kills
  during ingest also land among checkpoint reports).
"""

from __future__ import annotations

import time

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.reliability.conftest import Pids, alive, experiment_config, steady_files, steps

ASHA = (
    "  name: adaptive_asha\n  metric: loss\n  smaller_is_better: true\n"
    "  time_metric: batches\n  max_time: 16\n  max_trials: 6\n  max_concurrent_trials: 2\n"
    "  divisor: 4\n  max_rungs: 3\n  mode: aggressive"
)


def _restart(local: LocalCluster, pids: Pids) -> set[int]:
    """SIGKILL the master, let the trials report into the void, start it again; the pids of
    the trials that were running when it died."""
    running = {pid for pid in pids.all().values() if alive(pid)}
    local.kill_master()
    time.sleep(1.0)
    local.start_master()
    return running


def test_master_sigkilled_during_a_search_loses_and_repeats_nothing(
    local: LocalCluster, api: Api, pids: Pids
) -> None:
    local.start_agent("a1", slots=2)
    hp = (
        f"  steps: 16\n  period: 1\n  sleep: 0.08\n  pid_dir: {pids.root}\n"
        "  x:\n    type: double\n    minval: 0\n    maxval: 1"
    )
    exp_id = api.create_experiment(experiment_config(ASHA, hp), steady_files())
    survivors: set[int] = set()

    # 1. right after the searcher created its first trials
    api.wait_until(lambda: api.trials(exp_id), timeout=30, what="the first trials")
    survivors |= _restart(local, pids)

    # 2. during metric ingest
    api.wait_until(
        lambda: any(len(steps(api, t["id"])) >= 4 for t in api.trials(exp_id)),
        timeout=60,
        what="trials reporting metrics",
    )
    survivors |= _restart(local, pids)

    # 3. once the searcher has moved on to later trials
    api.wait_until(lambda: len(api.trials(exp_id)) >= 4, timeout=90, what="later trials")
    survivors |= _restart(local, pids)

    try:
        exp = api.wait_state(exp_id, timeout=120)
    except AssertionError as exc:  # say where the search stands
        where = [
            (t["id"], t["state"], t["restarts"], len(steps(api, t["id"])))
            for t in api.trials(exp_id)
        ]
        raise AssertionError(f"{exc}; trials (id, state, restarts, steps): {where}") from None
    assert exp["state"] == "STATE_COMPLETED"
    trials = api.trials(exp_id)
    assert len(trials) == 6  # no trial created twice
    assert len({t["hparams"]["x"] for t in trials}) == 6
    runs = pids.all()
    assert survivors, "no trial was running at any of the kills"
    for trial in trials:
        assert trial["state"] == "STATE_COMPLETED", trial
        assert trial["restarts"] == 0, trial  # never restarted ...
        assert [run for (t, run) in runs if t == trial["id"]] == [1]  # ... nor run again
        trained = steps(api, trial["id"])
        assert trained == list(range(1, len(trained) + 1)), (trial["id"], trained)
        validated = steps(api, trial["id"], "validation")
        assert validated == list(range(1, len(validated) + 1)), (trial["id"], validated)
    saved = [
        (c["training"]["trialId"], int(c["metadata"]["steps_completed"]))
        for c in api.checkpoints(exp_id)
    ]
    assert len(saved) == len(set(saved)), sorted(saved)  # no checkpoint registered twice
    lengths = [len(steps(api, t["id"])) for t in trials]
    assert any(n < 16 for n in lengths), lengths  # ASHA still stopped some early
    assert 16 in lengths, lengths
    # the trials that were running when the master died lived on and ended by themselves
    for (trial_id, _run), pid in runs.items():
        if pid in survivors:
            logs = api.logs(trial_id)
            assert "training done" in logs or "preempted after step" in logs, logs
