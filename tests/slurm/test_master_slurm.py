"""Experiments through the master's Slurm resource manager, on the real Slurm.

A real ``stalwart master`` (``resource_manager: {type: slurm}``) submits each trial as a batch
job; the job runs ``python -m stalwart.hpc.task``, which fetches its spec, runs the Core API
script ``tests/integration/trials/train.py``, ships its logs and reports its exit. No agent runs.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import trial_files
from tests.slurm.masters import job_ids, steps, trial_config

pytestmark = pytest.mark.usefixtures("real_slurm")


def test_trial_runs_as_a_slurm_job_to_completion(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, job_root = slurm_master
    hp = "  steps: 4\n  period: 2\n  x: 0.5"
    exp_id = api.create_experiment(trial_config(hp), trial_files("train.py"))
    exp = api.wait_state(exp_id, timeout=90)
    (trial,) = api.trials(exp_id)
    logs = api.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs
    assert trial["state"] == "STATE_COMPLETED"
    assert steps(api, trial["id"]) == [1, 2, 3, 4]
    assert steps(api, trial["id"], "validation") == [2, 4]
    assert "training done" in logs
    assert "submitted as Slurm job" in logs
    assert "container exited with code 0" in logs
    (job_dir,) = [p for p in job_root.iterdir() if p.is_dir()]
    token = job_dir / "token"
    assert token.stat().st_mode & 0o777 == 0o600
    assert token.read_text().strip() not in (job_dir / "job.sbatch").read_text()


GPU_PARTITION = "  default_partition: debug\n  partition_overrides:\n    debug: {slot_type: cuda}\n"


@pytest.mark.parametrize("slurm_master", [GPU_PARTITION], indirect=True)
def test_a_gpu_trial_gets_the_gpus_slurm_allocated(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, job_root = slurm_master
    gpus = subprocess.run(["sinfo", "--noheader", "--format=%G"], capture_output=True, text=True)
    if "gpu" not in gpus.stdout:
        pytest.skip("this Slurm has no GPUs (setup.sh with STALWART_SLURM_FAKE_GPUS=2)")
    config = trial_config("  steps: 2\n  period: 2").replace(
        "entrypoint: python3 train.py",
        "entrypoint: echo visible=$CUDA_VISIBLE_DEVICES && python3 train.py",
    )
    exp_id = api.create_experiment(config, trial_files("train.py"))
    exp = api.wait_state(exp_id, timeout=90)
    (trial,) = api.trials(exp_id)
    logs = api.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs
    assert "visible=0" in logs or "visible=1" in logs, logs
    (job_dir,) = [p for p in job_root.iterdir() if p.is_dir()]
    assert "#SBATCH --gpus-per-node=1" in (job_dir / "job.sbatch").read_text()


def test_kill_cancels_the_slurm_job(slurm_master: tuple[LocalCluster, Api, Path]) -> None:
    _, api, job_root = slurm_master
    hp = "  steps: 100000\n  period: 1000\n  sleep: 0.01"
    exp_id = api.create_experiment(trial_config(hp), trial_files("train.py"))
    api.wait_until(
        lambda: [t for t in api.trials(exp_id) if steps(api, t["id"])],
        timeout=60,
        what="a first metric from the Slurm job",
    )
    assert job_ids(job_root), "the job should be in squeue while it runs"
    started = time.monotonic()
    api.post(f"/api/v1/experiments/{exp_id}/kill")
    exp = api.wait_state(exp_id, timeout=60)
    assert exp["state"] == "STATE_CANCELED"
    (trial,) = api.trials(exp_id)
    assert trial["state"] == "STATE_CANCELED"
    api.wait_until(lambda: not job_ids(job_root), timeout=30, what="the job to leave squeue")
    assert time.monotonic() - started < 40


def test_cancel_checkpoints_the_running_trial_and_ends_its_job(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, job_root = slurm_master
    hp = "  steps: 100000\n  period: 5\n  sleep: 0.02"
    exp_id = api.create_experiment(trial_config(hp), trial_files("train.py"))
    trial_id = _wait_first_metric(api, exp_id)
    api.post(f"/api/v1/experiments/{exp_id}/cancel")
    exp = api.wait_state(exp_id, timeout=90)
    logs = api.logs(trial_id)
    assert exp["state"] == "STATE_CANCELED", logs
    assert "preempted after step" in logs  # it checkpointed and exited by itself
    assert "container exited with code 0" in logs
    assert any(c["state"] == "STATE_COMPLETED" for c in api.checkpoints(exp_id))
    api.wait_until(lambda: not job_ids(job_root), timeout=30, what="the job to end")


def test_cancel_of_a_queued_job_scancels_it_at_once(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, job_root = slurm_master
    # Held: it stays queued in Slurm (nothing to checkpoint), so cancel must scancel it.
    slurm = "\n  sbatch_args: ['--hold']"
    exp_id = api.create_experiment(trial_config("  steps: 2", slurm=slurm), trial_files("train.py"))
    api.wait_until(lambda: job_ids(job_root), timeout=60, what="the job in squeue")
    api.post(f"/api/v1/experiments/{exp_id}/cancel")
    assert api.wait_state(exp_id, timeout=60)["state"] == "STATE_CANCELED"
    (trial,) = api.trials(exp_id)
    assert trial["state"] == "STATE_CANCELED"
    api.wait_until(lambda: not job_ids(job_root), timeout=30, what="the job to leave squeue")


def test_rejected_sbatch_args_error_the_trial(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, _ = slurm_master
    hp = "  steps: 2\n  period: 2"
    # Slurm itself refuses this (no node has the feature); Stalwart's checks let it through.
    slurm = "\n  sbatch_args: ['--constraint=no-such-feature']"
    exp_id = api.create_experiment(trial_config(hp, slurm=slurm), trial_files("train.py"))
    exp = api.wait_state(exp_id, timeout=60)
    assert exp["state"] == "STATE_ERROR"
    (trial,) = api.trials(exp_id)
    assert trial["state"] == "STATE_ERROR"
    assert trial["restarts"] == 0
    logs = api.logs(trial["id"])
    assert "Slurm rejected the job: sbatch: error:" in logs, logs
    assert "retrying cannot help: ERROR" in logs


def test_forbidden_sbatch_args_error_the_trial_with_every_problem(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, _ = slurm_master
    slurm = "\n  sbatch_args: ['--nodes=2', '--partition=urgent']"
    exp_id = api.create_experiment(trial_config("  steps: 2", slurm=slurm), trial_files("train.py"))
    assert api.wait_state(exp_id, timeout=60)["state"] == "STATE_ERROR"
    (trial,) = api.trials(exp_id)
    logs = api.logs(trial["id"])
    assert "the Slurm job cannot be built" in logs, logs
    assert "--nodes" in logs
    assert "--partition" in logs


def _wait_first_metric(api: Api, exp_id: int) -> int:
    trials = api.wait_until(
        lambda: [t for t in api.trials(exp_id) if steps(api, t["id"])],
        timeout=60,
        what="a first metric from the Slurm job",
    )
    return int(trials[0]["id"])


def test_pause_checkpoints_and_activate_resumes(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, job_root = slurm_master
    hp = "  steps: 200\n  period: 5\n  sleep: 0.05"
    exp_id = api.create_experiment(trial_config(hp), trial_files("train.py"))
    trial_id = _wait_first_metric(api, exp_id)
    api.post(f"/api/v1/experiments/{exp_id}/pause")
    assert api.wait_state(exp_id, ["STATE_PAUSED"], timeout=60)["state"] == "STATE_PAUSED"
    api.wait_until(lambda: not job_ids(job_root), timeout=30, what="the job to end")
    logs = api.logs(trial_id)
    assert "preempted after step" in logs, logs  # it checkpointed and exited by itself
    assert "container exited with code 0" in logs
    api.post(f"/api/v1/experiments/{exp_id}/activate")
    exp = api.wait_state(exp_id, timeout=120)
    logs = api.logs(trial_id)
    assert exp["state"] == "STATE_COMPLETED", logs
    (trial,) = api.trials(exp_id)
    assert trial["restarts"] == 0
    assert "resumed from step" in logs
    assert len({p.name for p in job_root.iterdir() if p.is_dir()}) == 2  # two Slurm jobs


def test_a_job_the_urgent_partition_preempts_resumes_from_its_checkpoint(
    slurm_master: tuple[LocalCluster, Api, Path],
) -> None:
    _, api, job_root = slurm_master
    hp = "  steps: 200\n  period: 5\n  sleep: 0.05"
    exp_id = api.create_experiment(trial_config(hp), trial_files("train.py"))
    trial_id = _wait_first_metric(api, exp_id)
    (job,) = job_ids(job_root)
    node = subprocess.run(
        ["squeue", "--noheader", f"--jobs={job}", "--format=%N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The trial's whole node, in the partition that preempts `debug`.
    urgent = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--partition=urgent",
            f"--nodelist={node}",
            "--exclusive",
            "--output=/dev/null",
            "--wrap=sleep 4",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        exp = api.wait_state(exp_id, timeout=150)
    finally:
        subprocess.run(["scancel", urgent], check=False)
    logs = api.logs(trial_id)
    assert exp["state"] == "STATE_COMPLETED", logs
    (trial,) = api.trials(exp_id)
    assert trial["restarts"] == 0, logs  # a preemption is not a failure
    assert "from Slurm: asking the task to checkpoint" in logs, logs
    assert "was preempted" in logs
    assert "resumed from step" in logs
