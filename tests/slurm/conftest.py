"""Fixtures for the Slurm/PBS tests: captured outputs, and a real single-node Slurm.

``real_slurm`` uses the Slurm that ``scripts/slurm/setup.sh`` started. When none answers, the
tests that need it skip with a message saying how to start one, except under ``CI=true``, where
the fixture runs ``setup.sh`` itself and fails (never skips) if Slurm still cannot start.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.integration.conftest import free_port
from tests.slurm.masters import cancel_leftovers, master_config

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "slurm" / "setup.sh"


def fixture_text(name: str) -> str:
    """A captured output (``squeue_mixed.stdout``), or a hand-written sample."""
    return (FIXTURES / name).read_text()


def fixture_index() -> dict[str, Any]:
    """``index.json``: argv and exit status per capture, job id per role."""
    data: dict[str, Any] = json.loads(fixture_text("index.json"))
    return data


@pytest.fixture(scope="session")
def captured_jobs() -> dict[str, str]:
    """Role -> Slurm job id in the captured outputs (``"completed"`` -> ``"6"``)."""
    jobs: dict[str, str] = fixture_index()["jobs"]
    return jobs


def _controller_refuses(conf: Path = Path("/etc/slurm/slurm.conf")) -> str | None:
    """A fast "nobody listens" check (sinfo takes ~10 s to give up on a stopped slurmctld)."""
    try:
        text = conf.read_text()
    except OSError:
        return None
    settings = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )
    host = settings.get("SlurmctldHost", "").strip()
    if not host:
        return None
    address = host.split("(", 1)[1].rstrip(")") if "(" in host else host
    port = int(settings.get("SlurmctldPort", "6817").strip().split("-", 1)[0])
    try:
        socket.create_connection((address, port), timeout=2).close()
    except ConnectionRefusedError:
        return f"slurmctld is not listening on {address}:{port}"
    except OSError:
        return None  # unreachable or unresolvable here: let sinfo decide
    return None


def _slurm_problem() -> str | None:
    """None when a Slurm controller answers and a node can take jobs, else what is wrong."""
    if shutil.which("sinfo") is None:
        return "the Slurm commands are not installed"
    refused = _controller_refuses()
    if refused:
        return refused
    try:
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%T"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "sinfo timed out"
    if done.returncode != 0:
        return f"sinfo failed: {done.stderr.strip()}"
    states = done.stdout.split()
    if not any(s.rstrip("*~#!%$@^-+") in ("idle", "mixed", "allocated") for s in states):
        return f"no node can take jobs (node states: {states or 'none'})"
    return None


def _has_gpus() -> bool:
    """Whether the running Slurm declares GPUs (GRES) on its nodes."""
    done = subprocess.run(
        ["sinfo", "--noheader", "--format=%G"], capture_output=True, text=True, check=False
    )
    return "gpu" in done.stdout


@pytest.fixture(scope="session")
def real_slurm() -> None:
    """A working Slurm on this machine (see the module docstring). Under CI=true it also has
    fake GPUs (the GPU tests would otherwise skip): a running Slurm without them is set up
    again with them."""
    problem = _slurm_problem()
    ci = os.environ.get("CI") == "true"
    if problem is None and (not ci or _has_gpus()):
        return
    if not ci:
        pytest.skip(
            f"no running Slurm ({problem}); start one with `sudo scripts/slurm/setup.sh` "
            "(CI=true starts it and fails if it cannot)"
        )
    env = {
        **os.environ,
        "STALWART_SLURM_FAKE_GPUS": os.environ.get("STALWART_SLURM_FAKE_GPUS", "2"),
    }
    done = subprocess.run(
        ["bash", str(SETUP)], capture_output=True, text=True, timeout=600, check=False, env=env
    )
    problem = _slurm_problem()
    if done.returncode != 0 or problem is not None:
        pytest.fail(
            f"CI=true needs a real Slurm, and scripts/slurm/setup.sh could not start one "
            f"(exit {done.returncode}; {problem or 'sinfo answers'}):\n{done.stdout}\n{done.stderr}"
        )


@pytest.fixture
def slurm_master(
    tmp_path: Path, request: pytest.FixtureRequest, real_slurm: None
) -> Iterator[tuple[LocalCluster, Api, Path]]:
    """A real master on the real Slurm: ``(cluster, admin api, job_storage_root)``. Indirect
    parametrization appends its ``param`` to the ``resource_manager`` section."""
    job_root = tmp_path / "jobs"
    config = tmp_path / "master.yaml"
    config.write_text(master_config(job_root, getattr(request, "param", "")))
    cluster = LocalCluster(home=tmp_path / "home", port=free_port(), master_config=config)
    cluster.start_master()
    api = Api(cluster.url)
    try:
        yield cluster, api, job_root
    finally:
        api.close()
        cluster.stop()
        cancel_leftovers(job_root)
