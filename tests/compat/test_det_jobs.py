"""The job queue with the official ``det`` CLI (0.38.1) and its bindings, against a real master
and a real agent with one slot.

One command runs and holds the slot; two more commands and an experiment wait. What users rely
on: ``det job list`` shows the waiting jobs in the order the scheduler will start them
(interactive tasks ahead of experiments of the same priority, first come first served);
``det job update --priority`` and a move ahead of another job (``aheadOf``) reorder them, and
when the slot frees the job listed first is the one that starts, then the next; a weight (a
fair-share setting) and a pool move are refused with a message saying why.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess, describe, local_agent
from tests.compat.test_det_workflows import UUID, WORKFLOWS, admin

__all__ = ["admin"]  # logged in as admin, on this module's master and agent

pytestmark = pytest.mark.compat

WAIT_S = 90.0


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    """A local agent with one slot."""
    yield from local_agent(stalwart_master, "jobs", 1)


def _jobs(cli: Det) -> list[dict[str, Any]]:
    data = json.loads(cli.ok("job", "list", "--json").stdout)
    jobs: list[dict[str, Any]] = data["jobs"]
    return jobs


def _queued(cli: Det) -> list[str]:
    """The waiting jobs' ids, in the order ``det job list`` shows them."""
    return [j["jobId"] for j in _jobs(cli) if j["summary"]["state"] == "STATE_QUEUED"]


def _scheduled(cli: Det) -> list[str]:
    return [j["jobId"] for j in _jobs(cli) if j["summary"]["state"] == "STATE_SCHEDULED"]


def _wait(what: str, check: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"{what} within {WAIT_S:.0f} s"
            return value
        time.sleep(0.3)


def _command(cli: Det) -> str:
    done = cli.ok("cmd", "run", "-d", "sleep 600")
    command_id = done.stdout.strip()
    assert UUID.fullmatch(command_id), describe(done)
    return command_id


def _experiment(cli: Det, workdir: Path) -> int:
    model = workdir / "model"
    model.mkdir()
    shutil.copy(WORKFLOWS / "trial.py", model / "trial.py")
    config = workdir / "exp.yaml"
    config.write_text(
        "name: queued-exp\nentrypoint: python3 trial.py\n"
        "hyperparameters:\n  steps: 1000\n  sleep: 0.5\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n"
        "max_restarts: 0\n",
        encoding="utf-8",
    )
    done = cli.ok("experiment", "create", str(config), str(model))
    found = re.search(r"Created experiment (\d+)", done.stdout)
    assert found, describe(done)
    return int(found.group(1))


MOVE_SCRIPT = """
import sys
from determined.common.api import authentication, bindings
master, job, other = sys.argv[1:4]
sess = authentication.login(master, "admin", "")
update = bindings.v1QueueControl(jobId=job, aheadOf=other)
bindings.post_UpdateJobQueue(sess, body=bindings.v1UpdateJobQueueRequest(updates=[update]))
"""


def test_the_listed_order_is_the_order_jobs_start(
    admin: Det, det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    running = _command(admin)
    _wait("the first command holds the slot", lambda: _scheduled(admin) == [running])
    first, second = _command(admin), _command(admin)
    exp_id = _experiment(admin, tmp_path)
    jobs = _wait("the experiment is queued", lambda: len(_queued(admin)) == 3 and _jobs(admin))
    by_id = {j["jobId"]: j for j in jobs}
    exp_job = next(j["jobId"] for j in jobs if j["entityId"] == str(exp_id))
    assert by_id[exp_job]["type"] == "TYPE_EXPERIMENT"
    assert by_id[first]["type"] == "TYPE_COMMAND"
    assert by_id[running]["allocatedSlots"] == 1
    assert by_id[first]["requestedSlots"] == 1
    assert by_id[first]["allocatedSlots"] == 0
    assert by_id[first]["username"] == "admin"
    # interactive tasks first, first come first served; then the experiment
    assert _queued(admin) == [first, second, exp_job]
    table = admin.ok("job", "list").stdout
    assert "queued-exp" in table
    assert "STATE_QUEUED" in table

    admin.ok("job", "update", second, "--priority", "30")
    assert _queued(admin) == [second, first, exp_job]
    # the official bindings move the experiment ahead of the second command
    moved = subprocess.run(
        [str(det_venv / "bin" / "python"), "-c", MOVE_SCRIPT, stalwart_master.url, exp_job, second],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert moved.returncode == 0, moved.stderr
    assert _queued(admin) == [exp_job, second, first]
    assert {j["jobId"]: j["priority"] for j in _jobs(admin)}[exp_job] == 29

    refused = admin.run("job", "update", first, "--weight", "2")
    assert refused.returncode != 0, describe(refused)
    refused = admin.run("job", "update", first, "--resource-pool", "other")
    assert refused.returncode != 0, describe(refused)
    refused = admin.run("job", "update", first, "--priority", "100")
    assert refused.returncode != 0, describe(refused)
    assert _queued(admin) == [exp_job, second, first]

    # the slot frees: the job listed first starts, then the next
    admin.ok("cmd", "kill", running)
    _wait("the experiment starts first", lambda: _scheduled(admin) == [exp_job])
    assert _queued(admin) == [second, first]
    admin.ok("experiment", "kill", str(exp_id))
    _wait("the second command starts next", lambda: _scheduled(admin) == [second])
    assert _queued(admin) == [first]
    admin.ok("cmd", "kill", second)
    _wait("the first command starts last", lambda: _scheduled(admin) == [first])
    admin.ok("cmd", "kill", first)
    _wait("the queue empties", lambda: _jobs(admin) == [])


def test_batch_updates_and_refusals_saying_which_scheduler_uses_them(admin: Det) -> None:
    job = _command(admin)
    try:
        admin.ok("job", "update-batch", f"{job}.priority=3")
        assert {j["jobId"]: j["priority"] for j in _jobs(admin)}[job] == 3
        done = admin.run("job", "update", job, "--weight", "2")
        assert done.returncode != 0, describe(done)
        assert "fair_share" in done.stderr, describe(done)
        done = admin.run("job", "update", "no-such-job", "--priority", "3")
        assert done.returncode != 0, describe(done)
    finally:
        admin.ok("cmd", "kill", job)
