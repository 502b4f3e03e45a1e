"""Against a real Slurm (``scripts/slurm/setup.sh``): submit generated scripts, track, cancel.

Skipped with a message when no Slurm runs, unless ``CI=true`` (see ``conftest.real_slurm``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

import pytest

from stalwart.hpc.errors import HpcCommandError
from stalwart.hpc.layout import BatchRequest
from stalwart.hpc.runner import CommandResult, SubprocessRunner
from stalwart.hpc.slurm import SlurmClient, SlurmTracker
from stalwart.hpc.slurm.partitions import partitions_to_pools
from stalwart.hpc.slurm.tracker import JobUpdate
from stalwart.hpc.states import Outcome

pytestmark = pytest.mark.usefixtures("real_slurm")


class CountingRunner(SubprocessRunner):
    """Runs commands for real and remembers their names."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __call__(self, argv: Sequence[str], *, timeout: float) -> CommandResult:
        self.names.append(argv[0])
        return super().__call__(argv, timeout=timeout)


@pytest.fixture
def runner() -> CountingRunner:
    return CountingRunner()


@pytest.fixture
def client(runner: CountingRunner) -> SlurmClient:
    return SlurmClient(runner, user="root" if _is_root() else None)


def _is_root() -> bool:
    import os

    return os.geteuid() == 0


def request(tmp_path: Path, name: str, code: str, **changes: object) -> BatchRequest:
    base = BatchRequest(
        allocation_id=f"{name}-{tmp_path.name}",
        slots=1,
        slot_type="cpu",
        command=(sys.executable, "-c", code),
        job_storage_root=PurePosixPath(tmp_path),
        env=(("GREETING", "hello from slurm"),),
        requeue=False,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def follow(tracker: SlurmTracker, job_id: str, until: str, timeout: float = 60) -> list[JobUpdate]:
    """Poll until ``job_id`` reaches allocation state ``until``; returns its updates."""
    updates: list[JobUpdate] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        updates += [u for u in tracker.poll() if u.job_id == job_id]
        if updates and updates[-1].status.allocation_state == until:
            return updates
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not reach {until} in {timeout}s: {updates}")


def test_generated_script_runs_to_completion(
    tmp_path: Path, client: SlurmClient, runner: CountingRunner
) -> None:
    code = "import os; print(os.environ['GREETING'], os.environ['STALWART_ALLOCATION_ID'])"
    req = request(tmp_path, "ok", code)
    job_id = client.submit(req)
    tracker = SlurmTracker(client, min_interval=0.2)
    tracker.track(job_id, req.allocation_id)
    updates = follow(tracker, job_id, "TERMINATED")
    final = updates[-1]
    assert final.key == req.allocation_id
    assert final.status.outcome is Outcome.SUCCEEDED, final.status
    assert final.status.exit_code == 0
    assert tracker.job_ids == []
    out = (tmp_path / req.allocation_id / f"slurm-{job_id}.out").read_text()
    assert f"hello from slurm {req.allocation_id}" in out
    assert f"stalwart: Slurm job {job_id} (restart 0)" in out
    polls = runner.names.count("squeue")
    assert runner.names.count("sacct") <= polls  # at most one sacct per poll


def test_failed_job_reports_its_exit_code(tmp_path: Path, client: SlurmClient) -> None:
    req = request(tmp_path, "fail", "raise SystemExit(3)")
    job_id = client.submit(req)
    tracker = SlurmTracker(client, min_interval=0.2)
    tracker.track(job_id, req.allocation_id)
    final = follow(tracker, job_id, "TERMINATED")[-1]
    assert final.status.outcome is Outcome.FAILED
    assert final.status.reason == "failed: exited with code 3"


def test_cancelled_job(tmp_path: Path, client: SlurmClient) -> None:
    req = request(tmp_path, "cancel", "import time; time.sleep(300)")
    job_id = client.submit(req)
    tracker = SlurmTracker(client, min_interval=0.2)
    tracker.track(job_id, req.allocation_id)
    follow(tracker, job_id, "RUNNING")
    client.cancel([job_id])
    final = follow(tracker, job_id, "TERMINATED")[-1]
    assert final.status.outcome is Outcome.CANCELED
    client.cancel([job_id])  # cancelling an ended job is fine


def test_slurm_rejects_a_bad_submission(tmp_path: Path, client: SlurmClient) -> None:
    req = request(tmp_path, "reject", "pass", partition="no-such-partition")
    with pytest.raises(HpcCommandError, match="Invalid partition name specified") as caught:
        client.submit(req)
    assert not caught.value.retryable


def test_quoted_sbatch_args_reach_slurm(tmp_path: Path, client: SlurmClient) -> None:
    req = request(tmp_path, "args", "pass", scheduler_args=('--comment="two words"', "--mem=64M"))
    job_id = client.submit(req)
    try:
        job = client.show_job(job_id)
        assert job is not None
        assert job["Comment"] == "two words"
        assert job["JobName"] == req.job_name
        assert job["Requeue"] == "0"
    finally:
        client.cancel([job_id])


def test_partitions_become_pools(client: SlurmClient) -> None:
    pools = {pool.name: pool for pool in partitions_to_pools(client.sinfo())}
    assert "debug" in pools
    assert pools["debug"].default
    assert pools["debug"].usable_nodes >= 1


def test_gpu_slots_get_gpus(tmp_path: Path, client: SlurmClient) -> None:
    gpu_nodes = [n for n in client.sinfo() if n.gpus and n.usable]
    if not gpu_nodes:
        pytest.skip("no GPUs in this Slurm (start it with STALWART_SLURM_FAKE_GPUS=2)")
    code = "import os; print('gpus', os.environ.get('SLURM_GPUS_ON_NODE'))"
    req = request(tmp_path, "gpu", code, slot_type="cuda", partition=gpu_nodes[0].partition)
    job_id = client.submit(req)
    tracker = SlurmTracker(client, min_interval=0.2)
    tracker.track(job_id, req.allocation_id)
    final = follow(tracker, job_id, "TERMINATED")[-1]
    assert final.status.outcome is Outcome.SUCCEEDED, final.status
    out = (tmp_path / req.allocation_id / f"slurm-{job_id}.out").read_text()
    assert "gpus 1" in out
