"""``stalwart trial ...`` (and its alias ``t``) against a real master and agent."""

from __future__ import annotations

import json
import time
from pathlib import Path

from stalwart.client import TRIAL_TERMINAL_STATES, Client, Experiment
from tests.cli.conftest import Cli, one_error_line
from tests.client.support import CONFIG


def test_describe_and_logs(cli: Cli, finished: Experiment) -> None:
    (trial,) = finished.trials()
    tid = str(trial.id)
    described = cli("trial", "describe", tid)
    assert described.code == 0, described.err
    assert "COMPLETED" in described.out
    assert "Hyperparameters: steps=4, period=2, x=0.5" in described.out
    assert "Best validation: " in described.out
    data = json.loads(cli("t", "describe", tid, "--json", "--metrics").out)
    assert data["trial"]["id"] == trial.id
    assert [row["batches"] for row in data["workloads"]] == [1, 2, 3, 4]
    assert "Trial" in cli("t", "describe", tid, "--metrics").out

    everything = cli("trial", "logs", tid).out.splitlines()
    assert any("training done" in line for line in everything)
    assert cli("t", "logs", tid, "--head", "2").out.splitlines() == everything[:2]
    assert cli("t", "logs", tid, "--tail", "2").out.splitlines() == everything[-2:]
    assert cli("t", "logs", tid, "-f").out.splitlines() == everything  # ends: trial is done
    both = cli("t", "logs", tid, "--head", "1", "--tail", "1")
    assert both.code == 2
    assert "--head or --tail" in both.err


def test_kill_a_running_trial(cli: Cli, admin: Client, model_dir: Path) -> None:
    config = CONFIG.replace("steps: 4", "steps: 400\n  sleep: 0.05")
    exp = admin.create_experiment(config, model_dir)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        trials = exp.trials()
        if trials and trials[0].state == "RUNNING":
            break
        time.sleep(0.1)
    (trial,) = exp.trials()
    assert trial.state == "RUNNING"
    result = cli("t", "kill", str(trial.id))
    assert result.code == 0, result.err
    assert result.out.strip() == f"Killed trial {trial.id}."
    list(trial.logs(follow=True))  # returns once the trial has ended
    assert trial.reload().state in TRIAL_TERMINAL_STATES
    exp.kill()
    exp.wait(timeout=30, interval=0.1)


def test_unknown_trial_is_one_line(cli: Cli) -> None:
    for args in (("describe",), ("logs",), ("kill",)):
        result = cli("trial", *args, "987654")
        assert result.code == 1, args
        assert one_error_line(result.err) == "error: trial 987654 not found", args
