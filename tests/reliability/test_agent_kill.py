"""SIGKILL an agent while its trial runs: the trial moves to another agent and runs once.

The master loses the agent after ``cluster.agent_timeout`` (3 s here), ends its allocation and
reschedules the trial on the second agent, which resumes from the latest checkpoint. The old
process outlives its agent (nothing killed it), but it can no longer report: the master rejects
its run, so it stops. When the first agent comes back it gets none of the old work, and every
step of the trial is stored exactly once.
"""

from __future__ import annotations

import re
import signal

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.reliability.conftest import Pids, alive, experiment_config, steady_files, steps

SINGLE = "  name: single\n  metric: loss\n  smaller_is_better: true"


def test_sigkilled_agent_trial_is_rescheduled_and_runs_once(
    local: LocalCluster, api: Api, pids: Pids
) -> None:
    local.start_agent("a1", slots=1)
    hp = f"  steps: 120\n  period: 5\n  sleep: 0.05\n  pid_dir: {pids.root}"
    exp_id = api.create_experiment(experiment_config(SINGLE, hp), steady_files())
    trial_id = api.wait_until(
        lambda: [
            t["id"] for t in api.trials(exp_id) if len(steps(api, t["id"], "validation")) >= 2
        ],
        timeout=60,
        what="a trial with checkpoints",
    )[0]
    local.start_agent("a2", slots=1)
    old_pid = pids.runs(trial_id)[1]
    local.stop_agent("a1", sig=signal.SIGKILL)
    assert alive(old_pid)  # the agent's death does not kill its tasks

    # rescheduled on a2 after the agent timeout, from the latest checkpoint
    api.wait_until(lambda: 2 in pids.runs(trial_id), timeout=30, what="the rescheduled run")
    new_pid = pids.runs(trial_id)[2]
    logs = api.wait_until(
        lambda: (text := api.logs(trial_id)) and "resumed from step" in text and text,
        timeout=30,
        what="the resumed run",
    )
    assert "agent a1 was lost (no sync for 3s)" in logs, logs  # cluster.agent_timeout
    workdir = (pids.root / f"{trial_id}-2.cwd").read_text()  # run 2 may have ended already
    assert str(local.agent_home("a2")) in workdir, workdir  # run 2 is on the second agent
    # the orphan of run 1 is rejected at its next report and stops: never two runs at once
    api.wait_until(lambda: not alive(old_pid), timeout=15, what="the orphaned run 1 to stop")

    # the first agent comes back: it is given none of the old work
    local.start_agent("a1", slots=1)
    exp = api.wait_state(exp_id, timeout=90)
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = api.trials(exp_id)
    assert trial["state"] == "STATE_COMPLETED"
    assert sorted(pids.runs(trial_id)) == [1, 2]  # one run per agent life, no third
    assert alive(new_pid) is False
    assert steps(api, trial_id) == list(range(1, 121))  # every step stored exactly once
    validations = steps(api, trial_id, "validation")
    assert validations == sorted(set(validations))
    assert validations[-1] == 120
    resumed = int(re.findall(r"resumed from step (\d+)", api.logs(trial_id))[0])
    assert resumed > 0


def test_a_returning_agent_kills_what_its_earlier_life_left_running(
    local: LocalCluster, api: Api, pids: Pids
) -> None:
    """The orphan of a lost agent that reports nothing for a while (a long step) cannot be
    stopped by the master; the agent, when it comes back, kills it."""
    local.start_agent("a1", slots=1)
    hp = (
        f"  steps: 8\n  period: 2\n  sleep: 0.05\n  pid_dir: {pids.root}\n"
        "  stall_after: 4\n  stall_seconds: 60"
    )
    exp_id = api.create_experiment(experiment_config(SINGLE, hp), steady_files())
    trial_id = api.wait_until(
        lambda: [t["id"] for t in api.trials(exp_id) if "stalling" in api.logs(t["id"])],
        timeout=60,
        what="run 1 to stall",
    )[0]
    old_pid = pids.runs(trial_id)[1]
    local.start_agent("a2", slots=1)
    local.stop_agent("a1", sig=signal.SIGKILL)
    assert api.wait_state(exp_id, timeout=60)["state"] == "STATE_COMPLETED"  # run 2, on a2
    assert steps(api, trial_id) == list(range(1, 9))
    assert alive(old_pid)  # still stalled: nothing has told it yet that it lost its trial
    local.start_agent("a1", slots=1)
    api.wait_until(
        lambda: not alive(old_pid), timeout=10, what="the returning agent to kill its orphan"
    )
