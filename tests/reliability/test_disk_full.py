"""Checkpoint storage runs out of space: the checkpoint fails cleanly, nothing half-written stays.

Two variants of the same test. ``tmpfs``: the storage is a real 1 MiB file system mounted for
the test (CI runs as root; skipped where mounting is not allowed). ``rlimit`` (always runs): a
plain directory, and the trial limits the size of the files it writes (``RLIMIT_FSIZE``,
enforced by the kernel), so the write fails with ``EFBIG`` instead of ``ENOSPC``: the same
failure path. The trial (``trials/diskfull.py``)
stores a small checkpoint that fits, then a 4 MiB one that does not, and does not catch the
error. Users rely on:

- the trial's log naming the failed checkpoint and saying the storage is full and what to do;
- the trial ending ERROR (``max_restarts: 0``), with one completed checkpoint: the one that fit;
- the master listing the failed checkpoint as ``STATE_ERROR`` with no files, never COMPLETED;
- no directory of the failed checkpoint left in the storage.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.local import LocalCluster
from tests.integration.api import Api
from tests.reliability.conftest import TRIALS, experiment_config

SIZE = 1024 * 1024
BIG = 4 * SIZE


@pytest.fixture(params=["tmpfs", "rlimit"])
def small_storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """``(directory, fsize_limit)``: a 1 MiB tmpfs (limit 0; skipped where mounting is not
    allowed), or a plain directory and a 1 MiB ``RLIMIT_FSIZE`` for the trial (always runs)."""
    path = tmp_path / "ckpt"
    path.mkdir()
    if request.param == "rlimit":
        yield path, SIZE
        return
    mount = shutil.which("mount")
    done = (
        subprocess.run(
            [mount, "-t", "tmpfs", "-o", f"size={SIZE}", "stalwart-test", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if mount is not None
        else None
    )
    if done is None or done.returncode != 0:
        why = done.stderr.strip() if done is not None else "no mount command"
        pytest.skip(f"cannot mount a tmpfs here ({why}); the rlimit variant covers the path")
    try:
        yield path, 0
    finally:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def _checkpoint_dirs(root: Path) -> set[str]:
    return {p.name for p in root.rglob("*") if p.is_dir() and len(p.name) == 36}


def test_a_full_checkpoint_storage_fails_the_checkpoint_and_registers_nothing_half_written(
    local: LocalCluster, api: Api, small_storage: tuple[Path, int]
) -> None:
    storage, fsize_limit = small_storage
    local.start_agent("a1", slots=1)
    hp = f"  big_bytes: {BIG}\n  fsize_limit: {fsize_limit}"
    config = experiment_config(
        "  name: single\n  metric: loss\n  max_length:\n    batches: 2",
        hp,
        max_restarts="0",
        checkpoint_storage=f"{{type: shared_fs, host_path: {storage}}}",
    )
    exp_id = api.create_experiment(config, {"train.py": (TRIALS / "diskfull.py").read_text()})
    trial = api.wait_until(
        lambda: (
            (t := api.trials(exp_id))
            and t[0]["state"] in {"STATE_ERROR", "STATE_COMPLETED"}
            and t[0]
        ),
        timeout=120,
        what="the trial to end",
    )
    assert trial["state"] == "STATE_ERROR", api.logs(trial["id"])[-2000:]
    logs = api.wait_until(  # the agent ships the last lines of the log shortly after the exit
        lambda: (text := api.logs(trial["id"])) and "storage is full" in text and text,
        timeout=30,
        what="the failed checkpoint's line in the trial log",
    )
    assert "checkpointed step 1" in logs
    assert "checkpointed step 2" not in logs
    assert "FAILED, nothing of it was kept" in logs, logs[-2000:]
    assert "the checkpoint storage is full" in logs, logs[-2000:]

    checkpoints = api.checkpoints(exp_id)
    by_state = {c["state"]: c for c in checkpoints}
    assert sorted(c["state"] for c in checkpoints) == ["STATE_COMPLETED", "STATE_ERROR"], (
        checkpoints
    )
    good, failed = by_state["STATE_COMPLETED"], by_state["STATE_ERROR"]
    assert not failed["resources"], failed
    assert failed["uuid"] in logs
    assert api.get(f"/api/v1/trials/{trial['id']}")["trial"]["checkpointCount"] == 1
    assert _checkpoint_dirs(storage) == {good["uuid"]}
