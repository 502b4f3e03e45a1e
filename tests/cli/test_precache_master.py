"""``stalwart envs precache --from-master``: a batch cluster's image cache takes the running
master's pre-pull plan (``GET /api/v1/prepull``), so images of queued experiments are converted
before their trials land on a compute node."""

from __future__ import annotations

import json
from pathlib import Path

from stalwart.client import Client
from tests.cli.conftest import Cli
from tests.client.support import CONFIG

SLURM = (
    "resource_manager:\n  type: slurm\n  job_storage_root: {0}/jobs\n"
    "  container_run_type: apptainer\n  image_cache_dir: {0}/cache\n"
)


def test_precache_from_the_master_adds_its_queued_experiments_images(
    cli: Cli, admin: Client, model_dir: Path, tmp_path: Path
) -> None:
    master_config = tmp_path / "master.yaml"
    master_config.write_text(SLURM.format(tmp_path))
    queued = CONFIG + "environment:\n  image: team/queued-for-precache:3\n"
    exp = admin.create_experiment(queued, model_dir, activate=False)  # PAUSED: queued
    try:
        assert "team/queued-for-precache:3" in admin.prepull_plan()["default"]
        args = ("envs", "precache", "-c", str(master_config), "--dry-run", "--json")
        plain = cli(*args)
        assert plain.code == 0, plain.err
        assert "team/queued-for-precache:3" not in json.loads(plain.out)["images"]
        planned = cli(*args, "--from-master", "--no-defaults")
        assert planned.code == 0, planned.err
        plan = json.loads(planned.out)
        assert "team/queued-for-precache:3" in plan["images"]
        (step,) = [s for s in plan["steps"] if s["image"] == "team/queued-for-precache:3"]
        assert step["argv"][:2] == ["apptainer", "pull"]
        assert step["path"].startswith(str(tmp_path / "cache"))
    finally:
        exp.kill()
