"""Distributed trials on a real master and real agents: a 2-process PyTorch DDP step on CPU.

The entrypoint is ``python3 -m stalwart.launch.torch_distributed python3 train_ddp.py``; the
trial (``trials/train_ddp.py``) trains one DDP step with gloo, allgathers each rank's notes
through ``DistributedContext.from_torch_distributed()``, and the chief reports them. One test
puts both processes in one container (one agent with 2 slots), the other in two containers
(two agents with 1 slot each).
"""

from __future__ import annotations

import json
from typing import Any

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import trial_files
from tests.launch.conftest import require_torch

CONFIG = """\
name: it-ddp
entrypoint: python3 -m stalwart.launch.torch_distributed python3 train_ddp.py
resources:
  slots_per_trial: 2
max_restarts: 0
hyperparameters:
  x: 1
searcher:
  name: single
  metric: loss
  smaller_is_better: true
"""


def _log_entries(api: Api, trial_id: int) -> list[dict[str, Any]]:
    response = api.http.get(f"/api/v1/trials/{trial_id}/logs")
    response.raise_for_status()
    return [json.loads(line)["result"] for line in response.text.splitlines() if line]


def _run_ddp(api: Api) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the DDP trial to its end; the trial and its log entries."""
    exp_id = api.create_experiment(CONFIG, trial_files("train_ddp.py"))
    exp = api.wait_state(exp_id, timeout=120)
    (trial,) = api.trials(exp_id)
    entries = _log_entries(api, trial["id"])
    text = "".join(e["log"] for e in entries)
    assert exp["state"] == "STATE_COMPLETED", text
    assert trial["state"] == "STATE_COMPLETED", text
    (report,) = api.metrics(trial["id"])
    metrics = report["metrics"]["avg_metrics"]
    assert metrics["world_size"] == 2
    assert metrics["ranks_sum"] == 1
    assert metrics["replicas_in_step"] == 1.0
    checkpoints = [c for c in api.checkpoints(exp_id) if c["state"] == "STATE_COMPLETED"]
    assert len(checkpoints) == 1
    assert "model.pt" in checkpoints[0]["resources"]
    return trial, entries


def _allgather_lines(entries: list[dict[str, Any]]) -> dict[int, str]:
    """``{rank_id: text}`` of the trial's allgather lines (the rank comes from the prefix)."""
    return {
        int(e["rankId"]): e["log"].strip()
        for e in entries
        if "allgather ranks" in e["log"] and e.get("rankId") is not None
    }


def test_ddp_on_one_agent_with_two_slots(local: LocalCluster, api: Api) -> None:
    require_torch()
    local.start_agent("a1", slots=2)
    _, entries = _run_ddp(api)
    lines = _allgather_lines(entries)
    assert sorted(lines) == [0, 1], lines
    for rank, line in lines.items():
        assert line.startswith(f"rank {rank} of 2 on agent a1: allgather ranks [0, 1]"), line
        assert line.endswith("agents ['a1', 'a1'] replicas in step True"), line
    assert len({e["containerId"] for e in entries if e.get("rankId") is not None}) == 1


def test_ddp_across_two_agents(local: LocalCluster, api: Api) -> None:
    require_torch()
    local.start_agent("a1", slots=1)
    local.start_agent("a2", slots=1)
    _, entries = _run_ddp(api)
    lines = _allgather_lines(entries)
    assert sorted(lines) == [0, 1], lines
    agents = set()
    for rank, line in lines.items():
        assert line.startswith(f"rank {rank} of 2 on agent "), line
        assert "allgather ranks [0, 1]" in line, line
        assert line.endswith("replicas in step True"), line
        agents.add(line.split(" on agent ")[1].split(":")[0])
    assert agents == {"a1", "a2"}
    assert len({e["containerId"] for e in entries if e.get("rankId") is not None}) == 2
