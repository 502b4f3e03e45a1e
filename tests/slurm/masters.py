"""Helpers for the tests that run a real master against the real Slurm (``slurm_master``).

The ``slurm_master`` fixture (in ``conftest.py``) starts a ``stalwart master`` with
``resource_manager: {type: slurm}`` and a per-test ``job_storage_root``; these helpers find the
test's own jobs in squeue (job names are ``stalwart-<allocation id>``, and each allocation has
a directory under the job root) and build experiment configs for the Core API script
``tests/integration/trials/train.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.integration.api import Api

__all__ = ["SINGLE", "cancel_leftovers", "job_ids", "master_config", "steps", "trial_config"]

SINGLE = "  name: single\n  metric: loss\n  smaller_is_better: true"


def master_config(job_root: Path, extra: str = "") -> str:
    """The master config: Slurm, fast ticks and polls, ``extra`` appended to the
    ``resource_manager`` section (indented two spaces)."""
    return (
        "cluster:\n  preemption_timeout: 30\n  tick: 0.5\n"
        "resource_manager:\n"
        "  type: slurm\n"
        f"  job_storage_root: {job_root}\n"
        "  poll_interval: 0.5\n"
        f"{extra}"
    )


def job_ids(job_root: Path) -> list[str]:
    """Slurm job ids (in squeue) of this test's allocations."""
    names = {f"stalwart-{p.name}" for p in job_root.glob("*") if p.is_dir()}
    out = subprocess.run(
        ["squeue", "--noheader", "--format=%i|%j"], capture_output=True, text=True, check=True
    ).stdout
    rows = [line.split("|", 1) for line in out.splitlines() if "|" in line]
    return [job for job, name in rows if name in names]


def cancel_leftovers(job_root: Path) -> None:
    """scancel whatever the test's allocations still have in squeue."""
    if job_root.exists():
        leftovers = job_ids(job_root)
        if leftovers:
            subprocess.run(["scancel", *leftovers], check=False)


def trial_config(hp: str, searcher: str = SINGLE, **extra: str) -> str:
    """An experiment config running ``train.py`` with hyperparameters ``hp`` (YAML lines)."""
    lines = [
        "name: slurm-it",
        "entrypoint: python3 train.py",
        "resources:\n  slots_per_trial: 1",
        f"hyperparameters:\n{hp}",
        f"searcher:\n{searcher}",
    ]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def steps(api: Api, trial_id: int, group: str = "training") -> list[int]:
    """The ``totalBatches`` of a trial's metrics of ``group``, in order."""
    return [int(m["totalBatches"]) for m in api.metrics(trial_id, group)]
