"""Multi-node trials through the master's Slurm resource manager, on the real Slurm.

``scripts/slurm/setup.sh`` starts two nodes on this host (two slurmd daemons, told apart by
their ports). A 2-slot torch_distributed trial with ``slots_per_node: 1`` becomes one 2-node
job: one launcher per node (``srun``), each reports its address at ``batch/start``, and both get
the two addresses in ``rendezvous.json``; the DDP step (gloo, CPU) then runs across the nodes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import trial_files
from tests.launch.conftest import require_torch
from tests.slurm.masters import job_ids

pytestmark = pytest.mark.usefixtures("real_slurm")

Master = tuple[LocalCluster, Api, Path]

CPU = "  default_partition: debug\n  partition_overrides:\n    debug: {slot_type: cpu}\n"

DDP = """\
name: slurm-ddp
entrypoint: python3 -m stalwart.launch.torch_distributed python3 train_ddp.py
resources:
  slots_per_trial: 2
max_restarts: 0
slurm:
  slots_per_node: 1
hyperparameters:
  x: 1
searcher:
  name: single
  metric: loss
  smaller_is_better: true
"""


def _nodes() -> list[str]:
    out = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--partition=debug", "--format=%N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(set(out.split()))


def _entries(api: Api, trial_id: int) -> list[dict[str, Any]]:
    response = api.http.get(f"/api/v1/trials/{trial_id}/logs")
    response.raise_for_status()
    return [json.loads(line)["result"] for line in response.text.splitlines() if line]


@pytest.mark.parametrize("slurm_master", [CPU], indirect=True)
def test_a_two_node_torch_distributed_trial(slurm_master: Master) -> None:
    require_torch()
    if len(_nodes()) < 2:
        pytest.skip("this Slurm has one node (setup.sh with STALWART_SLURM_NODES=2)")
    _, api, job_root = slurm_master
    exp_id = api.create_experiment(DDP, trial_files("train_ddp.py"))
    exp = api.wait_state(exp_id, timeout=240)
    (trial,) = api.trials(exp_id)
    entries = _entries(api, trial["id"])
    text = "".join(e["log"] for e in entries)
    assert exp["state"] == "STATE_COMPLETED", text
    (report,) = api.metrics(trial["id"])
    metrics = report["metrics"]["avg_metrics"]
    assert metrics["world_size"] == 2
    assert metrics["ranks_sum"] == 1
    assert metrics["replicas_in_step"] == 1.0
    # One job on two nodes, one launcher (container) on each.
    (job_dir,) = [p for p in job_root.iterdir() if p.is_dir()]
    script = (job_dir / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script
    assert "#SBATCH --ntasks-per-node=1" in script
    started = sorted(line for line in text.splitlines() if "started on " in line)
    assert len(started) == 2, text
    assert len({e["containerId"] for e in entries if e.get("rankId") is not None}) == 2
    lines = [e["log"] for e in entries if "allgather ranks [0, 1]" in e["log"]]
    assert len(lines) == 2, text
    api.wait_until(lambda: not job_ids(job_root), timeout=30, what="the job to leave squeue")


TOO_BIG = CPU + "  stuck_job_timeout: 2\n"


@pytest.mark.parametrize("slurm_master", [TOO_BIG], indirect=True)
def test_a_trial_needing_more_nodes_than_the_partition_errors(slurm_master: Master) -> None:
    _, api, job_root = slurm_master
    nodes = len(_nodes())
    config = DDP.replace("slots_per_trial: 2", f"slots_per_trial: {nodes + 1}").replace(
        "torch_distributed python3 train_ddp.py", "torch_distributed true"
    )
    exp_id = api.create_experiment(config, trial_files("train_ddp.py"))
    exp = api.wait_state(exp_id, timeout=90)
    (trial,) = api.trials(exp_id)
    logs = api.logs(trial["id"])
    assert exp["state"] == "STATE_ERROR", logs
    assert "it needs more nodes than the partition allows" in logs, logs
    assert "resource_manager.stuck_job_timeout" in logs
    api.wait_until(lambda: not job_ids(job_root), timeout=30, what="the job to leave squeue")
