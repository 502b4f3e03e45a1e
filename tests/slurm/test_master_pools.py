"""Partitions as resource pools, and jobs stuck in Slurm's queue, through a real master on the
real Slurm (``scripts/slurm/setup.sh``: partitions ``debug`` (default) and ``urgent``)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import trial_files
from tests.slurm.masters import job_ids, trial_config

pytestmark = pytest.mark.usefixtures("real_slurm")

Master = tuple[LocalCluster, Api, Path]


def _cpus() -> int:
    out = subprocess.run(
        ["sinfo", "--noheader", "--partition=debug", "--format=%c"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[0])


def _nodes() -> int:
    out = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--partition=debug", "--format=%N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(out.split())


def _gpus() -> str:
    return subprocess.run(
        ["sinfo", "--noheader", "--format=%G"], capture_output=True, text=True, check=True
    ).stdout


def _pools(api: Api) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in api.get("/api/v1/resource-pools")["resourcePools"]}


def test_partitions_are_the_resource_pools(slurm_master: Master) -> None:
    _, api, _ = slurm_master
    pools = _pools(api)
    assert set(pools) == {"debug", "urgent"}
    debug = pools["debug"]
    assert debug["defaultComputePool"] is True
    assert pools["urgent"]["defaultComputePool"] is False
    assert debug["schedulerType"] == "SCHEDULER_TYPE_SLURM"
    assert debug["numAgents"] == _nodes()  # a node is an agent
    assert "Slurm partition debug" in debug["description"]
    if "gpu" in _gpus():  # the slot type comes from the partition's GRES
        assert debug["slotType"] == "TYPE_CUDA"
        assert debug["accelerator"] == "fake"
        assert debug["slotsPerAgent"] == 2
        assert debug["slotsAvailable"] == 2 * _nodes()
        assert "cuda GPUs (fake)" in debug["description"]
    else:
        assert debug["slotType"] == "TYPE_CPU"
        assert debug["slotsPerAgent"] == _cpus()
        assert debug["slotsAvailable"] == _cpus() * _nodes()


CPU_POOLS = "  partition_overrides:\n    urgent: {slot_type: cpu}\n"


@pytest.mark.parametrize("slurm_master", [CPU_POOLS], indirect=True)
def test_partition_overrides_set_the_slot_type(slurm_master: Master) -> None:
    _, api, _ = slurm_master
    urgent = _pools(api)["urgent"]
    assert urgent["slotType"] == "TYPE_CPU"
    assert urgent["accelerator"] is None
    assert urgent["slotsAvailable"] == _cpus() * _nodes()
    assert 0 <= urgent["slotsUsed"] <= _cpus() * _nodes()


def test_a_pool_that_is_not_a_partition_is_refused_at_create(slurm_master: Master) -> None:
    _, api, _ = slurm_master
    config = trial_config("  steps: 2").replace(
        "slots_per_trial: 1", "slots_per_trial: 1\n  resource_pool: gpus"
    )
    with pytest.raises(httpx.HTTPStatusError) as caught:
        api.create_experiment(config, trial_files("train.py"))
    assert caught.value.response.status_code == 400
    message = caught.value.response.json()["message"]
    assert "resource pool 'gpus' is not a Slurm partition" in message, message
    assert "debug, urgent" in message
    assert api.get("/api/v1/experiments")["experiments"] == []
    # A partition is accepted.
    exp_id = api.create_experiment(
        config.replace("resource_pool: gpus", "resource_pool: urgent"),
        trial_files("train.py"),
        activate=False,
    )
    assert api.experiment(exp_id)["resourcePool"] == "urgent"


STUCK = "  stuck_job_timeout: 3\n"


@pytest.mark.parametrize("slurm_master", [STUCK], indirect=True)
def test_a_job_that_cannot_start_is_cancelled_and_its_trial_errors(slurm_master: Master) -> None:
    _, api, job_root = slurm_master
    # A held job waits for someone to release it: Slurm's reason is JobHeldUser.
    slurm = "\n  sbatch_args: ['--hold']"
    exp_id = api.create_experiment(trial_config("  steps: 2", slurm=slurm), trial_files("train.py"))
    exp = api.wait_state(exp_id, timeout=90)
    (trial,) = api.trials(exp_id)
    logs = api.logs(trial["id"])
    assert exp["state"] == "STATE_ERROR", logs
    assert trial["state"] == "STATE_ERROR"
    assert trial["restarts"] == 0
    assert "will not start: queued: held by its user" in logs, logs
    assert "cancelled after waiting 3 s (resource_manager.stuck_job_timeout)" in logs
    api.wait_until(lambda: not job_ids(job_root), timeout=30, what="the job to leave squeue")
