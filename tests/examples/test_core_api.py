"""The Core API tutorial (``examples/core_api``): every stage off-cluster and on a cluster.

Off-cluster, each stage runs as a user runs it, ``python3 <stage>.py`` in an empty directory
(stage 4 also under ``torchrun`` with two workers). On the cluster each stage is submitted with
its own config, as ``stalwart e create <stage>.yaml .`` does, with the search and the distributed
run shortened by config overrides.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stalwart.client import Client, Experiment, Trial
from stalwart.local import LocalCluster
from tests.cli.conftest import Cli
from tests.examples.conftest import (
    EXAMPLES,
    completed,
    example_config,
    metric_steps,
    trial_log,
    validation_metrics,
)
from tests.launch.conftest import free_port, require_torch

CORE_API = EXAMPLES / "core_api"
STAGES = ["0_start", "1_metrics", "2_checkpoints", "3_hpsearch", "4_distributed"]
DONE = re.compile(r"done: w = (?P<w>[-\d.]+), b = (?P<b>[-\d.]+)")


def _fitted(output: str) -> tuple[float, float]:
    """The ``w`` and ``b`` of the script's last ``done:`` line."""
    found = DONE.findall(output)
    assert found, output
    w, b = found[-1]
    return float(w), float(b)


def _lines(output: str, prefix: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(prefix)]


def test_every_stage_runs_off_cluster(tmp_path: Path) -> None:
    """``python3 <stage>.py`` for each stage, and ``torchrun --nproc_per_node 2`` for stage 4,
    all at once (stages 2 to 4 sleep 5 s in all), each in a directory of its own."""
    require_torch()
    env = {**os.environ, "INTER_TRAIN_PROCESS_COMM_PORT_1": str(free_port())}
    for name in ("DET_MASTER", "DET_ALLOCATION_ID"):
        env.pop(name, None)  # off-cluster, whatever the test runner's environment says
    commands = {stage: [sys.executable, str(CORE_API / f"{stage}.py")] for stage in STAGES}
    commands["torchrun"] = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        f"--master_port={free_port()}",
        str(CORE_API / "4_distributed.py"),
    ]
    procs = {}
    for name, command in commands.items():
        (tmp_path / name).mkdir()
        procs[name] = subprocess.Popen(
            command,
            cwd=tmp_path / name,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    out = {}
    for name, proc in procs.items():
        out[name] = proc.communicate(timeout=120)[0]
        assert proc.returncode == 0, f"{name}:\n{out[name]}"

    # Stage 0 prints its progress and learns the line y = 3x + 2.
    assert len(_lines(out["0_start"], "batch ")) == 10
    w, b = _fitted(out["0_start"])
    assert abs(w - 3) < 0.05, out["0_start"]
    assert abs(b - 2) < 0.05, out["0_start"]
    # From stage 1 on, the metrics are printed by the off-cluster Core API.
    for stage in STAGES[1:]:
        assert len(_lines(out[stage], "[training] ")) == 100, out[stage]
        validation = _lines(out[stage], "[validation] ")
        assert len(validation) == 10, out[stage]
        assert validation[-1].startswith("[validation] steps_completed=100 "), out[stage]
    assert '"batches": 100' in _lines(out["3_hpsearch"], "[validation] ")[-1]
    # Stages 2 to 4 store a checkpoint at each validation, under ./checkpoints.
    for stage in ("2_checkpoints", "3_hpsearch", "4_distributed", "torchrun"):
        checkpoints = list((tmp_path / stage / "checkpoints").glob("*/state.json"))
        assert len(checkpoints) == 10, stage
    # Every stage learns the same line.
    for stage in STAGES[1:4]:
        assert _fitted(out[stage]) == (w, b), out[stage]
    # Stage 4 alone, then two workers sharing every batch: the same model, on both workers.
    assert _lines(out["4_distributed"], "worker ") == [
        "worker 0 of 1 starts at batch 0",
        "worker 0 done: w = 2.989736, b = 2.005932",
    ]
    two = out["torchrun"]
    assert "worker 0 of 2 starts at batch 0" in two, two
    assert "worker 1 of 2 starts at batch 0" in two, two
    assert "worker 0 done: w = 2.989736, b = 2.005932" in two, two
    assert "worker 1 done: w = 2.989736, b = 2.005932" in two, two
    # Only the chief reported.
    assert len(_lines(two, "[validation] ")) == 10


# -- on a cluster ---------------------------------------------------------------------------


def test_stage_0_with_the_cli_as_the_readme_says(
    cluster: LocalCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``stalwart e create 0_start.yaml . -f`` in the example's directory streams the
    trial's logs (what the script prints) until it ends."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in ("STALWART_MASTER", "DET_MASTER", "DET_USER", "DET_PASS"):
        monkeypatch.delenv(name, raising=False)
    with Client(cluster.url, config_dir=tmp_path / "stalwart", environ={}) as login:
        login.login("admin", "")
    monkeypatch.chdir(CORE_API)
    cli = Cli(cluster.url, capsys, monkeypatch)
    result = cli("e", "create", "0_start.yaml", ".", "-f")
    assert result.code == 0, result.err
    assert "Created experiment" in result.out
    assert "batch 100: training loss" in result.out
    assert "done: w = 2.990, b = 2.006" in result.out


def test_stage_1_reports_metrics(client: Client) -> None:
    exp = client.create_experiment(CORE_API / "1_metrics.yaml", CORE_API)
    (trial,) = completed(exp)
    assert metric_steps(trial, "training") == list(range(1, 101))
    assert metric_steps(trial, "validation") == list(range(10, 101, 10))
    assert validation_metrics(trial)[-1]["loss"] < 0.02


def _wait_for_checkpoint(exp: Experiment, timeout: float = 60.0) -> Trial:
    """The experiment's trial, once it has stored a checkpoint."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        trials = exp.trials()
        if trials and trials[0].checkpoints():
            return trials[0]
        time.sleep(0.1)
    raise AssertionError(f"experiment {exp.id} stored no checkpoint in {timeout:g}s")


def _wait_state(exp: Experiment, state: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while exp.reload().state != state:
        assert time.monotonic() < deadline, f"experiment {exp.id} is {exp.state}, not {state}"
        time.sleep(0.1)


def test_stage_2_checkpoints_stops_when_paused_and_resumes(client: Client) -> None:
    """Pausing asks the trial to stop: it does so after a checkpoint, and once activated it
    resumes from that checkpoint, so every batch is trained and reported exactly once."""
    exp = client.create_experiment(CORE_API / "2_checkpoints.yaml", CORE_API)
    _wait_for_checkpoint(exp)
    exp.pause()
    _wait_state(exp, "PAUSED")
    exp.activate()
    (trial,) = completed(exp)
    log = trial_log(trial)
    stopped = re.search(r"preempted after batch (\d+) \(checkpoint ([-0-9a-f]+)\)", log)
    assert stopped is not None, log
    batch, uuid = stopped.groups()
    assert int(batch) < 100
    assert f"resuming from checkpoint {uuid} at batch {batch}" in log
    assert metric_steps(trial, "training") == list(range(1, 101))
    assert metric_steps(trial, "validation") == list(range(10, 101, 10))
    assert "done: w = 2.990, b = 2.006" in log
    # Determined's default checkpoint policy: the latest and the best one are kept.
    losses = zip(metric_steps(trial, "validation"), validation_metrics(trial), strict=True)
    best = min(losses, key=lambda report: float(report[1]["loss"]))[0]
    kept = {c.steps_completed for c in trial.checkpoints() if c.state == "COMPLETED"}
    assert kept == {100, best}


def test_stage_3_adaptive_asha_search(client: Client) -> None:
    """A shortened search: four trials of 20 batches; every trial ends COMPLETED (trained to the
    end, or stopped early by the searcher) and the experiment names the best."""
    config = example_config(
        CORE_API / "3_hpsearch.yaml",
        {
            "hyperparameters.batches": 20,
            "searcher.max_time": 20,
            "searcher.max_trials": 4,
            "searcher.max_concurrent_trials": 2,
        },
    )
    exp = client.create_experiment(config, CORE_API)
    trials = completed(exp)
    assert len(trials) == 4
    assert all(t.state == "COMPLETED" for t in trials)
    assert len({t.hparams["lr"] for t in trials}) == 4
    losses = {}
    for trial in trials:
        reports = validation_metrics(trial)
        assert reports, trial_log(trial)
        assert all(r["batches"] <= 20 for r in reports)
        losses[trial.id] = min(r["loss"] for r in reports)
    assert exp.reload().data.best_trial_id == min(losses, key=losses.__getitem__)


def test_stage_4_two_workers_with_allgather(client: Client) -> None:
    require_torch()
    config = example_config(CORE_API / "4_distributed.yaml", {"hyperparameters.batches": 20})
    exp = client.create_experiment(config, CORE_API)
    (trial,) = completed(exp)
    log = trial_log(trial)
    assert "worker 0 of 2 starts at batch 0" in log
    assert "worker 1 of 2 starts at batch 0" in log
    done = {line.split("done:")[1] for line in log.splitlines() if "done:" in line}
    assert len(done) == 1, log  # both workers end with the same model
    assert metric_steps(trial, "validation") == [10, 20]
    assert metric_steps(trial, "training") == list(range(1, 21))
