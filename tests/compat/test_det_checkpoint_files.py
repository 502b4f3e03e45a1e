"""Checkpoint files with the official 0.38.1 client: ``det checkpoint rm`` and the SDK's
``Checkpoint.remove_files`` (deleting files by glob, refreshing resources), ``Checkpoint.
get_metrics``, downloads through the master (legacy ``GET /checkpoints/{uuid}``), ``det e set
gc-policy``'s preview (legacy ``GET /experiments/{id}/preview_gc``), ``Experiment.
delete_tensorboard_files`` and the legacy ``GET /tasks``.

One experiment (``workflows/ckpt_files_trial.py``: checkpoints at steps 2, 4 and 6 with four
files each, and a TensorBoard event file) runs on a local agent; its checkpoints live in the
master's default ``shared_fs`` storage under its home, so the tests check the files themselves.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stalwart.local import LocalCluster
from tests.compat.conftest import (
    Det,
    MasterProcess,
    describe,
    local_agent,
    logged_in_admin,
    sdk_result,
)

pytestmark = pytest.mark.compat

WORKFLOWS = Path(__file__).parent / "workflows"
SDK = WORKFLOWS / "ckpt_files_sdk.py"
WAIT_S = 90
FILES = [
    "metadata.json",
    "model/",
    "model/extra.bin",
    "model/weights.pt",
    "notes.txt",
    "state.json",
]


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess) -> Iterator[LocalCluster]:
    yield from local_agent(stalwart_master, "ckpt-files", 1)


@pytest.fixture(scope="module")
def admin(
    det_venv: Path,
    stalwart_master: MasterProcess,
    agent: LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Det:
    return logged_in_admin(det_venv, stalwart_master, tmp_path_factory)


@pytest.fixture(scope="module")
def ended(
    det_venv: Path, admin: Det, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, dict[int, str]]:
    """The completed experiment: ``(id, {steps completed: checkpoint uuid})``."""
    model = tmp_path_factory.mktemp("model")
    shutil.copy(WORKFLOWS / "ckpt_files_trial.py", model / "trial.py")
    config = model / "exp.yaml"
    config.write_text(
        "name: ckpt-files\nentrypoint: python3 trial.py\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n"
        "checkpoint_storage:\n  save_trial_latest: 3\n"
        "max_restarts: 0\n",
        encoding="utf-8",
    )
    created = admin.ok("experiment", "create", str(config), str(model))
    found = re.search(r"Created experiment (\d+)", created.stdout)
    assert found, describe(created)
    exp_id = int(found.group(1))
    waited = admin.run("experiment", "wait", str(exp_id), "--polling-interval", "1", timeout=WAIT_S)
    assert waited.returncode == 0, describe(waited)
    listed = sdk_result(det_venv, admin, SDK, "list", str(exp_id))
    return exp_id, {int(steps): uuid for uuid, steps in listed}


def _storage(master: MasterProcess) -> Path:
    return master.home / "checkpoints"


def _on_disk(master: MasterProcess, uuid: str) -> list[str]:
    root = _storage(master) / uuid
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _get(det_venv: Path, admin: Det, uuid: str) -> dict[str, Any]:
    got: dict[str, Any] = sdk_result(det_venv, admin, SDK, "get", uuid)
    return got


def test_gc_policy_preview_lists_what_the_policy_would_delete(
    admin: Det, ended: tuple[int, dict[int, str]]
) -> None:
    exp_id, _ckpts = ended
    done = admin.run(
        "experiment",
        "set",
        "gc-policy",
        str(exp_id),
        "--save-experiment-best",
        "0",
        "--save-trial-best",
        "0",
        "--save-trial-latest",
        "1",
        stdin="n\n",
    )
    out = done.stdout + done.stderr
    # only the newest (steps 6) is kept: 2 of the 3 checkpoints would go
    assert "This policy will delete 0 checkpoints with validations and 2 checkpoints" in out, (
        describe(done)
    )
    assert "Aborting operations." in out, describe(done)
    keep_all = admin.run(
        "experiment",
        "set",
        "gc-policy",
        str(exp_id),
        "--save-experiment-best",
        "0",
        "--save-trial-best",
        "0",
        "--save-trial-latest",
        "3",
        stdin="n\n",
    )
    assert "delete 0 checkpoints with validations and 0 checkpoints" in keep_all.stdout, describe(
        keep_all
    )


def test_download_through_the_master(
    det_venv: Path, admin: Det, ended: tuple[int, dict[int, str]], tmp_path: Path
) -> None:
    _exp_id, ckpts = ended
    target = tmp_path / "cli"
    admin.ok("checkpoint", "download", ckpts[6], "--mode", "master", "-o", str(target))
    assert (target / "model" / "weights.pt").read_bytes() == b"w" * 100
    assert "state.json" in {p.name for p in target.iterdir()}
    files = sdk_result(det_venv, admin, SDK, "download", ckpts[6], str(tmp_path / "sdk"))
    assert [f for f in FILES if not f.endswith("/")] == files


def test_checkpoint_metrics_answer_for_known_checkpoints(
    det_venv: Path, admin: Det, ended: tuple[int, dict[int, str]]
) -> None:
    _exp_id, ckpts = ended
    assert sdk_result(det_venv, admin, SDK, "metrics", ckpts[6]) == []


def test_rm_deletes_matching_files_and_records_what_is_left(
    det_venv: Path, stalwart_master: MasterProcess, admin: Det, ended: tuple[int, dict[int, str]]
) -> None:
    _exp_id, ckpts = ended
    uuid = ckpts[2]
    assert _get(det_venv, admin, uuid)["state"] == "COMPLETED"
    done = admin.ok(
        "checkpoint", "rm", uuid, "--glob", "model/*.bin", "--glob", "notes.txt", "--yes"
    )
    assert f"Removal of files from checkpoints {uuid} is in progress." in done.stdout
    assert _on_disk(stalwart_master, uuid) == ["metadata.json", "model/weights.pt", "state.json"]
    got = _get(det_venv, admin, uuid)
    assert got["state"] == "PARTIALLY_DELETED"
    assert sorted(got["resources"]) == ["metadata.json", "model/", "model/weights.pt", "state.json"]

    # a directory glob takes the directory with it; the SDK's remove_files sends the same call
    got = sdk_result(det_venv, admin, SDK, "remove", uuid, "model")
    assert sorted(got["resources"]) == ["metadata.json", "state.json"]
    assert _on_disk(stalwart_master, uuid) == ["metadata.json", "state.json"]

    # nothing left: the checkpoint is DELETED and its directory gone
    got = sdk_result(det_venv, admin, SDK, "remove", uuid, "**/*")
    assert got["state"] == "DELETED"  # (its last resources stay on record, as in Determined)
    assert not (_storage(stalwart_master) / uuid).exists()


def test_rm_refuses_unsafe_globs_and_registered_checkpoints(
    admin: Det, stalwart_master: MasterProcess, ended: tuple[int, dict[int, str]]
) -> None:
    _exp_id, ckpts = ended
    uuid = ckpts[4]
    unsafe = admin.run("checkpoint", "rm", uuid, "--glob", "../*", "--yes")
    assert unsafe.returncode != 0
    assert "cannot contain '..'" in unsafe.stdout + unsafe.stderr
    admin.ok("model", "create", "ckpt-files-model")
    admin.ok("model", "register-version", "ckpt-files-model", uuid)
    try:
        refused = admin.run("checkpoint", "rm", uuid, "--glob", "state.json", "--yes")
        assert refused.returncode != 0
        assert "model registry" in refused.stdout + refused.stderr
        assert "state.json" in _on_disk(stalwart_master, uuid)  # nothing was deleted
    finally:
        admin.ok("model", "delete", "ckpt-files-model")


def test_rm_without_globs_refreshes_resources_from_storage(
    det_venv: Path, stalwart_master: MasterProcess, admin: Det, ended: tuple[int, dict[int, str]]
) -> None:
    _exp_id, ckpts = ended
    uuid = ckpts[4]
    (_storage(stalwart_master) / uuid / "notes.txt").unlink()  # gone behind the master's back
    done = admin.ok("checkpoint", "rm", uuid)
    assert "refreshing resources of checkpoints" in done.stdout
    got = _get(det_venv, admin, uuid)
    assert got["state"] == "PARTIALLY_DELETED"
    assert "notes.txt" not in got["resources"]
    assert "model/weights.pt" in got["resources"]


def test_delete_tensorboard_files_of_an_experiment(
    det_venv: Path, stalwart_master: MasterProcess, admin: Det, ended: tuple[int, dict[int, str]]
) -> None:
    exp_id, ckpts = ended
    found = list(_storage(stalwart_master).glob(f"*/tensorboard/experiment/{exp_id}"))
    assert len(found) == 1, list(_storage(stalwart_master).rglob("*"))
    assert any(p.is_file() for p in found[0].rglob("*"))
    assert sdk_result(det_venv, admin, SDK, "delete-tb", str(exp_id)) == "deleted"
    assert not found[0].exists()
    assert (_storage(stalwart_master) / ckpts[4] / "state.json").exists()  # checkpoints stay


def test_set_gc_policy_collects_what_the_new_policy_drops(
    det_venv: Path, stalwart_master: MasterProcess, admin: Det, ended: tuple[int, dict[int, str]]
) -> None:
    exp_id, ckpts = ended
    assert _get(det_venv, admin, ckpts[6])["state"] == "COMPLETED"
    done = admin.ok(
        "experiment",
        "set",
        "gc-policy",
        str(exp_id),
        "--save-experiment-best",
        "0",
        "--save-trial-best",
        "0",
        "--save-trial-latest",
        "0",
        "--yes",
    )
    assert f"Set GC policy of experiment {exp_id}" in done.stdout
    config = admin.ok("experiment", "config", str(exp_id)).stdout
    assert "save_trial_latest: 0" in config
    deadline = time.monotonic() + WAIT_S
    while (_storage(stalwart_master) / ckpts[6]).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (_storage(stalwart_master) / ckpts[6]).exists()
    assert _get(det_venv, admin, ckpts[6])["state"] == "DELETED"
    # a partially deleted checkpoint is not the policy's to collect
    assert (_storage(stalwart_master) / ckpts[4] / "state.json").exists()


def test_legacy_tasks_maps_live_allocations(
    det_venv: Path, admin: Det, ended: tuple[int, dict[int, str]]
) -> None:
    started = admin.ok("command", "run", "-d", "sleep 60")
    task_id = started.stdout.strip().splitlines()[-1].strip()
    try:
        deadline = time.monotonic() + WAIT_S
        tasks: dict[str, Any] = {}
        while time.monotonic() < deadline:
            tasks = sdk_result(det_venv, admin, SDK, "tasks")
            if any(t["task_id"] == task_id for t in tasks.values()):
                break
        (allocation_id, summary), *_ = [(a, t) for a, t in tasks.items() if t["task_id"] == task_id]
        assert summary["allocation_id"] == allocation_id
        assert summary["slots_needed"] == 1
        assert summary["resource_pool"] == "default"
    finally:
        admin.ok("command", "kill", task_id)
