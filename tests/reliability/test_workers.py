"""A master serving from three worker processes (``workers: 3``), on PostgreSQL, with a real agent.

- A search runs to the end as on one process: every trial once, every step stored once, while
  users read from whichever worker answers them.
- SIGKILL the leading worker (the one running the cluster loop) mid-search: another worker leads,
  the supervisor replaces the dead one, and the search completes without restarting a trial.
- SIGTERM to the supervisor stops every worker; SIGKILL to it takes the workers with it (nothing
  keeps serving the port).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from stalwart.local import LocalCluster
from stalwart.master.stopping import STOP_BUDGET_S
from tests.integration.api import Api
from tests.reliability.conftest import (
    MASTER_CONFIG,
    Pids,
    alive,
    experiment_config,
    make_cluster,
    steady_files,
    steps,
)

ASHA = (
    "  name: adaptive_asha\n  metric: loss\n  smaller_is_better: true\n"
    "  time_metric: batches\n  max_time: 12\n  max_trials: 4\n  max_concurrent_trials: 2\n"
    "  divisor: 4\n  max_rungs: 2\n  mode: aggressive"
)
WORKERS = 3


@pytest.fixture
def local(tmp_path: Path, pg_url: str) -> Iterator[LocalCluster]:
    """A three-worker master on PostgreSQL with one agent (two slots); the conftest's ``api``
    signs in to it."""
    cluster = make_cluster(tmp_path, MASTER_CONFIG + f"workers: {WORKERS}\n", db=pg_url)
    cluster.start_master()
    cluster.start_agent("a1", slots=2)
    try:
        yield cluster
    finally:
        cluster.stop()


def workers_of(local: LocalCluster) -> set[int]:
    """The pids of the master's worker processes (the supervisor's live children)."""
    assert local.master is not None
    supervisor = local.master.pid
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    return {int(pid) for pid in children if alive(int(pid))}


def leader_of(local: LocalCluster) -> int:
    """The pid of the worker that leads (it writes it into the leader lock)."""
    text = (local.home / "run" / "leader.lock").read_text().strip()
    return int(text) if text else 0


def search(api: Api, pids: Pids) -> int:
    hp = (
        f"  steps: 12\n  period: 2\n  sleep: 0.1\n  pid_dir: {pids.root}\n"
        "  x:\n    type: double\n    minval: 0\n    maxval: 1"
    )
    return api.create_experiment(experiment_config(ASHA, hp), steady_files())


def assert_ran_once(api: Api, pids: Pids, exp_id: int) -> None:
    """Every trial completed in one run, each step stored once."""
    trials = api.trials(exp_id)
    assert len(trials) == 4
    for trial in trials:
        assert trial["state"] == "STATE_COMPLETED", trial
        assert trial["restarts"] == 0, trial
        done = steps(api, trial["id"])
        assert done == sorted(set(done)), trial  # none stored twice
    assert len(pids.all()) == 4  # one run per trial


def test_a_search_on_three_workers_runs_as_on_one(
    local: LocalCluster, api: Api, pids: Pids
) -> None:
    assert len(workers_of(local)) == WORKERS
    exp_id = search(api, pids)
    # users read while it runs, each on a fresh connection (the kernel hands connections to
    # any worker): every worker answers, and sees the search the leader drives
    answers: list[int] = []
    while api.experiment(exp_id)["state"] not in {"STATE_COMPLETED", "STATE_ERROR"}:
        with httpx.Client(base_url=local.url, headers=api.http.headers, timeout=30) as fresh:
            answer = fresh.get(f"/api/v1/experiments/{exp_id}/trials")
        assert answer.status_code == 200, answer.text
        answers.append(len(answer.json()["trials"]))
        time.sleep(0.2)  # a user's pace
    exp = api.wait_state(exp_id, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    assert_ran_once(api, pids, exp_id)
    assert answers == sorted(answers)  # no worker answered an older view after a newer one
    # the master's log, whichever worker answers, has what the leader logged: the search's end
    ended = f"stalwart.master.transitions: experiment {exp_id}: STOPPING_COMPLETED -> COMPLETED"
    for _ in range(4 * WORKERS):
        with httpx.Client(base_url=local.url, headers=api.http.headers, timeout=30) as fresh:
            answer = fresh.get("/api/v1/master/logs")
        assert answer.status_code == 200, answer.text
        lines = [json.loads(line)["result"]["logEntry"] for line in answer.text.splitlines()]
        assert ended in [line["message"] for line in lines]


def test_the_leading_worker_sigkilled_mid_search_is_replaced_and_nothing_repeats(
    local: LocalCluster, api: Api, pids: Pids
) -> None:
    exp_id = search(api, pids)
    api.wait_until(
        lambda: any(len(steps(api, t["id"])) >= 2 for t in api.trials(exp_id)),
        timeout=60,
        what="trials reporting metrics",
    )
    before = workers_of(local)
    leader = api.wait_until(lambda: leader_of(local), timeout=30, what="a leader")
    assert leader in before
    os.kill(leader, signal.SIGKILL)
    successor = api.wait_until(
        lambda: (found := leader_of(local)) != leader and found,
        timeout=30,
        what="another worker leading",
    )
    replaced = api.wait_until(
        lambda: len(now := workers_of(local)) == WORKERS and now,
        timeout=30,
        what="the supervisor replacing the dead worker",
    )
    assert leader not in replaced
    assert successor in replaced  # a live worker leads: a survivor or the replacement
    exp = api.wait_state(exp_id, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    assert_ran_once(api, pids, exp_id)


def test_the_supervisor_stops_its_workers_and_takes_them_along_when_killed(
    local: LocalCluster,
) -> None:
    assert local.master is not None
    workers = workers_of(local)
    local.master.send_signal(signal.SIGTERM)
    assert local.master.wait(timeout=STOP_BUDGET_S + 5) == 0
    assert not any(alive(pid) for pid in workers)

    local.start_master()
    workers = workers_of(local)
    local.kill_master()  # SIGKILL: the workers die with it
    until(lambda: not any(alive(pid) for pid in workers), "the workers to die")
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{local.url}/info", timeout=5)


def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
