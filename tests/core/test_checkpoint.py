"""CheckpointContext against a real master (files + master record) and the storage it opens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stalwart.core import CheckpointNotFoundError, Context, DummyDistributedContext, TaskEnv
from stalwart.core._checkpoint import LocalCheckpointContext
from stalwart.core._context import build_context
from stalwart.core._storage import (
    DirectoryStorage,
    list_resources,
    storage_config_of,
    storage_from_argument,
    storage_from_config,
)
from stalwart.errors import ConfigError
from stalwart.master.db.tables import Checkpoint, StorageBackend, Trial
from tests.core.conftest import FAST_RETRY, MasterServer, task_headers


def master_checkpoint(master: MasterServer, env: TaskEnv, uuid: str) -> dict[str, Any]:
    with master.client() as http:
        resp = http.get(f"/api/v1/checkpoints/{uuid}", headers=task_headers(env))
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()["checkpoint"]
    return body


def test_store_path_writes_files_and_reports(master: MasterServer, trial_env: TaskEnv) -> None:
    assert trial_env.trial is not None
    storage = trial_env.trial.config["checkpoint_storage"]
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 7, "note": "x"}) as (path, uuid):
            (path / "model.bin").write_bytes(b"12345")
            (path / "sub").mkdir()
            (path / "sub" / "opt.bin").write_bytes(b"1")
        assert path == Path(storage["host_path"]) / uuid
        with ctx.checkpoint.restore_path(uuid) as restored:
            assert (restored / "model.bin").read_bytes() == b"12345"
        assert ctx.checkpoint.get_metadata(uuid) == {"steps_completed": 7, "note": "x"}

    assert json.loads((path / "metadata.json").read_text()) == {"steps_completed": 7, "note": "x"}
    body = master_checkpoint(master, trial_env, uuid)
    assert body["state"] == "STATE_COMPLETED"
    assert body["taskId"] == trial_env.task_id
    assert body["allocationId"] == trial_env.allocation_id
    size = str((path / "metadata.json").stat().st_size)
    assert body["resources"] == {
        "metadata.json": size,
        "model.bin": "5",
        "sub/": "0",
        "sub/opt.bin": "1",
    }
    with master.state.sessions() as session:
        trial = session.get(Trial, trial_env.trial.trial_id)
        backend = session.get(StorageBackend, body["storageId"])
        assert trial is not None
        assert backend is not None
        assert trial.latest_checkpoint == uuid
        assert backend.config == storage


def test_metadata_needs_steps_completed(master: MasterServer, trial_env: TaskEnv) -> None:
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        with (
            pytest.raises(ValueError, match="'steps_completed'"),
            ctx.checkpoint.store_path({"epoch": 1}),
        ):
            pass  # pragma: no cover - never entered
        with pytest.raises(ValueError, match="'steps_completed'"):
            ctx.checkpoint.upload(Path("."), None)


def test_a_failing_block_leaves_nothing(master: MasterServer, trial_env: TaskEnv) -> None:
    def save_half(ctx: Context) -> None:
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
            (path / "half").write_bytes(b"x")
            raise OSError(f"disk full|{path}|{uuid}")

    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        with pytest.raises(OSError, match="disk full") as info:
            save_half(ctx)
        _, where, uuid = str(info.value).split("|")
        assert not Path(where).exists()
    with master.state.sessions() as session:  # reported as failed: ERROR, no files
        failed = session.get(Checkpoint, uuid)
        assert failed is not None
        assert (failed.state, failed.resources) == ("ERROR", {})


def test_upload_download_delete(master: MasterServer, trial_env: TaskEnv, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "a.pt").write_text("a")
    (src / "d" / "b.pt").write_text("bb")
    with build_context(trial_env, retry=FAST_RETRY) as ctx:
        uuid = ctx.checkpoint.upload(src, {"steps_completed": 3})
        assert not (src / "metadata.json").exists()  # the source is left alone
        ctx.checkpoint.download(uuid, tmp_path / "dst", selector=lambda p: p.endswith("b.pt"))
        assert list_resources(tmp_path / "dst") == {"d/": 0, "d/b.pt": 2}
        ctx.checkpoint.delete(uuid, globs=["d/*"])
        left = master_checkpoint(master, trial_env, uuid)["resources"]
        assert set(left) == {"a.pt", "d/", "metadata.json"}
        ctx.checkpoint.delete(uuid)
        with pytest.raises(CheckpointNotFoundError), ctx.checkpoint.restore_path(uuid):
            pass  # pragma: no cover - never entered
    assert master_checkpoint(master, trial_env, uuid)["state"] == "STATE_DELETED"


def test_local_checkpoints(tmp_path: Path) -> None:
    ckpt = LocalCheckpointContext(DummyDistributedContext(), DirectoryStorage(tmp_path))
    with ckpt.store_path({"steps_completed": 2, "loss": float("nan")}) as (path, uuid):
        (path / "w").write_text("w")
    assert ckpt.get_metadata(uuid) == {"steps_completed": 2, "loss": "NaN"}
    with ckpt.restore_path(uuid) as restored:
        assert restored == tmp_path / uuid


def test_storage_from_config(tmp_path: Path) -> None:
    shared = storage_from_config(
        {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "ckpts"}
    )
    assert isinstance(shared, DirectoryStorage)
    assert shared.base == tmp_path / "ckpts"
    directory = storage_from_config({"type": "directory", "container_path": str(tmp_path)})
    assert isinstance(directory, DirectoryStorage)
    assert directory.base == tmp_path
    s3 = storage_from_config({"type": "s3", "bucket": "b", "prefix": "p"})
    assert repr(s3) == "FsspecStorage('s3://b/p')"
    with pytest.raises(ConfigError, match="checkpoint_storage"):
        storage_from_config({"type": "directory"})
    local = storage_from_argument(str(tmp_path))
    assert isinstance(local, DirectoryStorage)
    assert local.base == tmp_path
    assert storage_config_of(str(tmp_path)) == {"type": "shared_fs", "host_path": str(tmp_path)}
    assert storage_config_of("gs://bucket/prefix") == {
        "type": "gcs",
        "bucket": "bucket",
        "prefix": "prefix",
    }
    with pytest.raises(ValueError, match="invalid checkpoint storage id"):
        shared.path_of("../x")
