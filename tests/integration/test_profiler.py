"""The profiler on a real cluster: a Core API trial with ``profiling.enabled: true`` sends
system metrics in the groups ``cpu``, ``memory``, ``disk`` and ``network``."""

from __future__ import annotations

import json
from typing import Any

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import trial_files

CONFIG = """\
name: profiled
entrypoint: python3 train.py
resources:
  slots_per_trial: 1
hyperparameters:
  steps: 3
  period: 3
  sleep: 0.3
searcher:
  name: single
  metric: loss
profiling:
  enabled: true
"""


def group_reports(api: Api, trial_id: int, group: str) -> list[dict[str, Any]]:
    response = api.http.get(
        "/api/v1/trials/metrics/trial_metrics", params={"trialIds": trial_id, "group": group}
    )
    response.raise_for_status()
    out: list[dict[str, Any]] = []
    for line in response.text.splitlines():
        if line.strip():
            out.extend(json.loads(line)["result"]["metrics"])
    return out


def test_a_profiled_trial_reports_system_metrics(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    exp_id = api.create_experiment(CONFIG, trial_files("train.py"))
    assert api.wait_state(exp_id, timeout=90)["state"] == "STATE_COMPLETED"
    (trial,) = api.trials(exp_id)
    cpu = group_reports(api, trial["id"], "cpu")
    assert cpu, api.logs(trial["id"])
    last = cpu[-1]
    assert last["totalBatches"] == 3  # the latest training step when it was reported
    ((agent, values),) = last["metrics"]["avg_metrics"].items()
    assert agent == "a1"
    assert 0.0 <= values["cpu_util_simple"] <= 100.0
    memory = group_reports(api, trial["id"], "memory")
    assert memory[-1]["metrics"]["avg_metrics"]["a1"]["memory_free"] > 0
    assert group_reports(api, trial["id"], "network")
