"""Commands and notebooks through the master's Slurm resource manager, on the real Slurm.

A real ``stalwart master`` (``resource_manager: {type: slurm}``) submits each interactive task
as a batch job; the job runs ``python -m stalwart.hpc.task``, which fetches the task's spec and
runs the command, or Stalwart's notebook program (JupyterLab) on the node. Users drive them with
the official ``det`` CLI (``determined==0.38.1``): a command's output comes back to the client
and it ends TERMINATED with code 0; a notebook becomes ready and its JupyterLab answers through
the master's proxy at the node address its launcher reported; a kill cancels the job.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess, describe, det_at
from tests.compat.conftest import det_venv as det_venv
from tests.compat.test_det_workflows import UUID
from tests.integration.api import Api
from tests.slurm.masters import job_ids

pytestmark = [pytest.mark.usefixtures("real_slurm"), pytest.mark.compat]

WAIT_S = 120.0


@pytest.fixture
def admin(det_venv: Path, slurm_master: tuple[LocalCluster, Api, Path], tmp_path: Path) -> Det:
    """The official CLI logged in as ``admin`` to the test's Slurm master."""
    cluster, _, _ = slurm_master
    assert cluster.master is not None
    master = MasterProcess(
        url=cluster.url,
        home=cluster.home,
        log_path=cluster.home / "logs" / "master.log",
        process=cluster.master,
    )
    cli = det_at(det_venv, master, tmp_path / "det")
    cli.login("admin", "")
    return cli


def _until(check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def _task(api: Api, kind: str, task_id: str) -> dict[str, Any]:
    return dict(api.get(f"/api/v1/{kind}s/{task_id}")[kind])


def _in_state(api: Api, kind: str, task_id: str, state: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        found = _task(api, kind, task_id)
        return found if found["state"] == f"STATE_{state}" else None

    result: dict[str, Any] = _until(check, f"{kind} {task_id} in {state}")
    return result


def _job_dir(job_root: Path, api: Api, task_id: str) -> Path:
    """The job directory of the task's (only) allocation."""
    allocations = api.get(f"/api/v1/tasks/{task_id}")["task"]["allocations"]
    (allocation,) = allocations
    return job_root / str(allocation["allocationId"])


def _trapping(code: int) -> str:
    """A command line whose shell traps SIGTERM (echoes ``got TERM``, exits ``code``) and only
    ever ends by that trap. Slurm SIGTERMs a step's processes one at a time, children first
    (``proctrack/linuxproc``), so a ``sleep 600 & wait`` alone may see its sleep die, ``wait``
    return 0 and the script end with 0 before the shell's own SIGTERM arrives: no trap. The loop
    waits again until the shell's own SIGTERM (Slurm's, or the launcher's to the group)."""
    trap = f"trap 'echo got TERM; exit {code}' TERM"
    return f"{trap}; echo trap set; while :; do sleep 600 & wait; done"


def _task_logs(api: Api, task_id: str) -> str:
    response = api.http.get(f"/api/v1/tasks/{task_id}/logs")
    response.raise_for_status()
    lines = [json.loads(line)["result"] for line in response.text.splitlines() if line]
    return "".join(entry.get("log") or "" for entry in lines)


def test_a_command_runs_as_a_slurm_job_and_prints_its_output(
    admin: Det, slurm_master: tuple[LocalCluster, Api, Path]
) -> None:
    _, api, job_root = slurm_master
    done = admin.run("cmd", "run", "echo hello from $SLURM_JOB_NAME", timeout=WAIT_S)
    assert done.returncode == 0, describe(done)
    found = UUID.search(done.stdout)
    assert found is not None, describe(done)
    command_id = found.group(0)
    job_dir = _job_dir(job_root, api, command_id)
    # The client printed the task's output, which ran in the Slurm job of its allocation.
    assert f"hello from stalwart-{job_dir.name}" in done.stdout, describe(done)
    command = _in_state(api, "command", command_id, "TERMINATED")
    assert command["exitStatus"] == "exited with code 0", command
    logs = _task_logs(api, command_id)
    assert "submitted as Slurm job" in logs, logs
    script = (job_dir / "job.sbatch").read_text()
    assert "--no-requeue" in script
    _until(lambda: not job_ids(job_root), "the job to leave squeue", 30)


def test_a_command_fails_with_its_exit_code(
    admin: Det, slurm_master: tuple[LocalCluster, Api, Path]
) -> None:
    _, api, _ = slurm_master
    done = admin.run("cmd", "run", "--config", "resources.slots=0", "exit 3", timeout=WAIT_S)
    assert done.returncode == 0, describe(done)
    found = UUID.search(done.stdout)
    assert found is not None, describe(done)
    command = _in_state(api, "command", found.group(0), "TERMINATED")
    assert str(command["exitStatus"]).startswith("exited with code 3"), command


def test_commands_sharing_a_node_get_their_own_service_ports_and_sbatch_args(
    admin: Det, slurm_master: tuple[LocalCluster, Api, Path], tmp_path: Path
) -> None:
    _, api, job_root = slurm_master
    node = _first_node()
    config = tmp_path / "command.yaml"
    config.write_text(
        "resources:\n  slots: 0\n"
        f"slurm:\n  sbatch_args: ['--nodelist={node}', '--comment=stalwart-command']\n"
    )
    ids = []
    for _ in range(2):
        done = admin.ok(
            "cmd",
            "run",
            "-d",
            "--config-file",
            str(config),
            "echo port=$DET_SERVICE_PORT; sleep 600",
        )
        ids.append(done.stdout.strip())
    try:
        ports = []
        for command_id in ids:

            def port_line(i: str = command_id) -> re.Match[str] | None:
                return re.search(r"port=(\d+)", _task_logs(api, i))

            text = _until(port_line, f"the port line of {command_id}")
            ports.append(int(text.group(1)))
        assert len(set(ports)) == 2, ports
        jobs = _until(lambda: len(job_ids(job_root)) == 2 and job_ids(job_root), "2 jobs")
        for job in jobs:
            shown = _scontrol(job)
            assert f"NodeList={node}" in shown, shown
            assert "Comment=stalwart-command" in shown, shown
    finally:
        for command_id in ids:
            admin.run("cmd", "kill", command_id)
    for command_id in ids:
        command = _in_state(api, "command", command_id, "TERMINATED")
        assert command["exitStatus"] != "exited with code 0", command
    _until(lambda: not job_ids(job_root), "the jobs to leave squeue", 60)


def test_a_command_scancelled_by_a_person_gets_sigterm_and_ends_with_slurms_reason(
    admin: Det, slurm_master: tuple[LocalCluster, Api, Path]
) -> None:
    _, api, job_root = slurm_master
    # A trial's SIGTERM is ignored (it is its preemption signal); a command's is not, so
    # its trap runs (a shell cannot trap a signal ignored on entry).
    done = admin.ok("cmd", "run", "-d", "--config", "resources.slots=0", _trapping(5))
    command_id = done.stdout.strip()
    _until(lambda: "trap set" in _task_logs(api, command_id), "the command to start")
    (job,) = job_ids(job_root)
    subprocess.run(["scancel", job], check=True)
    command = _in_state(api, "command", command_id, "TERMINATED")
    logs = _task_logs(api, command_id)
    assert "got TERM" in logs, logs
    # Slurm's reason when the master's poll sees CANCELLED first; the trap's exit when the
    # launcher's report arrives first (the first report wins: api/batch.py)
    status = str(command["exitStatus"])
    assert "cancelled (scancel" in status or status == "exited with code 5", command
    _until(lambda: not job_ids(job_root), "the job to leave squeue", 30)


def test_a_command_the_urgent_partition_preempts_ends_and_is_not_resumed(
    admin: Det, slurm_master: tuple[LocalCluster, Api, Path]
) -> None:
    _, api, job_root = slurm_master
    done = admin.ok("cmd", "run", "-d", "--config", "resources.slots=0", _trapping(7))
    command_id = done.stdout.strip()
    _until(lambda: "trap set" in _task_logs(api, command_id), "the command to start")
    (job,) = job_ids(job_root)
    node = subprocess.run(
        ["squeue", "--noheader", f"--jobs={job}", "--format=%N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
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
        command = _in_state(api, "command", command_id, "TERMINATED")
    finally:
        subprocess.run(["scancel", urgent], check=False)
    logs = _task_logs(api, command_id)
    assert "got TERM" in logs, logs
    # Nothing to resume: not the trials' "exit 0 after an acknowledged preemption".
    assert "preempted" in str(command["exitStatus"]), command
    with_one = api.get(f"/api/v1/tasks/{command_id}")["task"]["allocations"]
    assert len(with_one) == 1, with_one  # no new job for it


def test_a_command_larger_than_a_node_is_refused_with_the_reason(
    admin: Det, slurm_master: tuple[LocalCluster, Api, Path]
) -> None:
    _, api, job_root = slurm_master
    done = admin.run(
        "cmd",
        "run",
        "-d",
        "--config",
        "slurm.slots_per_node=1",
        "--config",
        "resources.slots=2",
        "true",
    )
    assert done.returncode == 0, describe(done)
    command = _in_state(api, "command", done.stdout.strip(), "TERMINATED")
    assert "runs on one node" in str(command["exitStatus"]), command
    assert not job_ids(job_root)


def test_a_notebook_on_slurm_answers_through_the_proxy_and_a_kill_cancels_its_job(
    admin: Det, slurm_master: tuple[LocalCluster, Api, Path]
) -> None:
    _, api, job_root = slurm_master
    done = admin.run("notebook", "start", "--no-browser", timeout=WAIT_S + 60)
    assert done.returncode == 0, describe(done)
    assert "Jupyter Notebook is running at" in done.stdout, describe(done)
    found = UUID.search(done.stdout)
    assert found is not None, describe(done)
    notebook_id = found.group(0)
    notebook = _in_state(api, "notebook", notebook_id, "RUNNING")
    address = notebook["serviceAddress"]
    assert address.startswith(f"/proxy/{notebook_id}/lab?token="), notebook
    token = address.split("token=", 1)[1]
    (job,) = job_ids(job_root)
    page = httpx.get(f"{api.url}{address}", timeout=30, follow_redirects=True)
    assert page.status_code == 200, page.text
    assert "JupyterLab" in page.text
    status = httpx.get(
        f"{api.url}/proxy/{notebook_id}/api/status",
        headers={"Authorization": f"token {token}"},
        timeout=30,
    )
    assert status.status_code == 200, status.text
    started = time.monotonic()
    admin.ok("notebook", "kill", notebook_id)
    _in_state(api, "notebook", notebook_id, "TERMINATED")
    _until(lambda: job not in job_ids(job_root), "the notebook's job to leave squeue", 60)
    assert time.monotonic() - started < 60
    logs = _task_logs(api, notebook_id)
    assert "Jupyter Server" in logs, logs


def _first_node() -> str:
    out = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--format=%N"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[0]


def _scontrol(job: str) -> str:
    return subprocess.run(
        ["scontrol", "--oneliner", "show", "job", job], capture_output=True, text=True, check=True
    ).stdout
