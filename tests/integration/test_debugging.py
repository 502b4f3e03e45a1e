"""What a user debugging a run sees, on a real master and a real agent: trial logs free of the
harness's own HTTP request lines at INFO level, and the cause of a failed run
(``GET /api/v1/ui/trials/{id}/cause``, ``GET /api/v1/ui/experiments/{id}/cause``) with its exit,
its log-policy label and its last error lines."""

from __future__ import annotations

import json
from typing import Any

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import trial_files


def _config(mode: str, max_restarts: int = 0, extra: str = "") -> str:
    return (
        f"name: debugging-{mode}\n"
        "entrypoint: python3 debugging.py\n"
        "resources:\n  slots_per_trial: 1\n"
        f"max_restarts: {max_restarts}\n"
        f"hyperparameters:\n  mode: {mode}\n"
        "searcher:\n  name: single\n  metric: loss\n"
    ) + extra


CANCEL_RETRIES_ON_OOM = (
    "log_policies:\n  - pattern: '.*CUDA out of memory.*'\n    action: cancel_retries\n"
)


def _entries(api: Api, trial_id: int) -> list[dict[str, Any]]:
    response = api.http.get(f"/api/v1/trials/{trial_id}/logs")
    response.raise_for_status()
    return [json.loads(line)["result"] for line in response.text.splitlines()]


def test_an_info_level_trial_log_has_no_harness_requests(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=1)
    exp_id = api.create_experiment(_config("ok"), trial_files("debugging.py"))
    assert api.wait_state(exp_id, timeout=120)["state"] == "STATE_COMPLETED"
    (trial,) = api.trials(exp_id)
    logs = [entry["log"] for entry in _entries(api, trial["id"])]
    requests = [line for line in logs if "HTTP Request:" in line]
    # only the script's own request: none of the harness's metrics, checkpoint or other posts
    assert len(requests) == 1, requests
    assert "/info" in requests[0]
    assert any("the user's own line" in line for line in logs)
    assert not any("metrics/batch" in line or "httpcore" in line for line in logs)
    # a run that did not fail has no cause
    cause = api.get(f"/api/v1/ui/trials/{trial['id']}/cause")
    assert cause["state"] == "STATE_COMPLETED"
    assert (cause["failed"], cause["failure"], cause["lines"]) == (False, None, [])
    assert cause["linesKind"] == "none"
    assert cause["logPolicyMatched"] is None
    experiment = api.get(f"/api/v1/ui/experiments/{exp_id}/cause")
    assert experiment["trialsErrored"] == 0
    assert experiment["firstErroredTrial"] is None


def test_the_cause_of_failed_runs(local: LocalCluster, api: Api) -> None:
    local.start_agent("a1", slots=3)
    files = trial_files("debugging.py")
    oom = api.create_experiment(_config("oom"), files)
    flaky = api.create_experiment(_config("exit3_once", max_restarts=1), files)
    cancelled = api.create_experiment(_config("oom", 3, CANCEL_RETRIES_ON_OOM), files)
    assert api.wait_state(oom, timeout=120)["state"] == "STATE_ERROR"
    assert api.wait_state(flaky, timeout=120)["state"] == "STATE_COMPLETED"
    assert api.wait_state(cancelled, timeout=120)["state"] == "STATE_ERROR"

    (trial,) = api.trials(oom)
    cause = api.get(f"/api/v1/ui/trials/{trial['id']}/cause")
    assert cause["trialId"] == trial["id"]
    assert cause["experimentId"] == oom
    assert (cause["state"], cause["failed"], cause["restarts"]) == ("STATE_ERROR", True, 0)
    assert cause["logPolicyMatched"] == "CUDA OOM"  # Determined's default log policy
    assert trial["logPolicyMatched"] == "CUDA OOM"
    assert (cause["dontRetry"], cause["excludedAgents"]) == ([], [])  # the default only labels
    failure = cause["failure"]
    assert failure["exitCode"] == 1
    assert failure["exitReason"] == "it exited with code 1"
    assert failure["agentId"] == "a1"
    assert failure["endTime"] >= failure["startTime"]
    assert cause["linesKind"] == "errors"
    lines = cause["lines"]
    assert 0 < len(lines) <= 20
    assert "RuntimeError: CUDA out of memory" in lines[-1]["log"]
    assert lines[-1]["stdtype"] == "stderr"
    assert all(line["allocationId"] == failure["allocationId"] for line in lines)
    assert all(line["source"] == "task" for line in lines)  # the run's own output
    assert any(line["log"].startswith("Traceback") for line in lines)
    assert not any("allocating the big tensor" in line["log"] for line in lines)  # stdout, INFO

    experiment = api.get(f"/api/v1/ui/experiments/{oom}/cause")
    assert (experiment["experimentId"], experiment["state"]) == (oom, "STATE_ERROR")
    assert experiment["trialsErrored"] == 1
    assert experiment["firstErroredTrial"] == cause

    # failed once, restarted, completed: the failure of its first run is still shown
    (restarted,) = api.trials(flaky)
    again = api.get(f"/api/v1/ui/trials/{restarted['id']}/cause")
    assert (again["state"], again["failed"], again["restarts"]) == ("STATE_COMPLETED", False, 1)
    assert again["failure"]["exitCode"] == 3
    assert again["logPolicyMatched"] is None
    assert again["linesKind"] == "last"  # it wrote no error: its last lines before the exit
    last = [(line["source"], line["log"]) for line in again["lines"]]
    assert ("task", "giving up on purpose\n") in last
    assert last[-1] == ("agent", "container exited with code 3\n")
    assert api.get(f"/api/v1/ui/experiments/{flaky}/cause")["trialsErrored"] == 0

    # a cancel_retries policy matched: not restarted, and the cause says which line did it
    (stopped,) = api.trials(cancelled)
    why = api.get(f"/api/v1/ui/trials/{stopped['id']}/cause")
    assert (why["failed"], why["restarts"], why["logPolicyMatched"]) == (True, 0, "CUDA OOM")
    (trigger,) = why["dontRetry"]
    assert trigger["pattern"] == ".*CUDA out of memory.*"
    assert trigger["line"].startswith("RuntimeError: CUDA out of memory. Tried to allocate")

    for path in (f"/api/v1/ui/trials/{10**6}/cause", f"/api/v1/ui/experiments/{10**6}/cause"):
        assert api.http.get(path).status_code == 404
