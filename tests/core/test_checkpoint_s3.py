"""CheckpointContext on object storage: a real master and a real S3 server (moto).

Checkpoints go through a temporary directory: ``store_path`` uploads it when the block ends and
only then reports the checkpoint; ``restore_path`` downloads into one. A failed block or upload
leaves nothing in the bucket and nothing at the master.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.core import CheckpointNotFoundError, Context, TaskEnv
from stalwart.core._context import build_context
from stalwart.master.db.tables import Checkpoint
from stalwart.storage import StorageError
from tests.core.conftest import CONFIG, FAST_RETRY, MasterServer, new_trial, task_headers
from tests.storage.s3 import S3Server, running_s3_server


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3_server() as server:
        yield server


def s3_trial(master: MasterServer, s3: S3Server, bucket: str) -> TaskEnv:
    storage = s3.config(bucket)
    lines = "".join(f"  {key}: {value}\n" for key, value in storage.items())
    return new_trial(master, CONFIG + "checkpoint_storage:\n" + lines)


def test_store_and_restore_through_s3(master: MasterServer, s3: S3Server) -> None:
    bucket = s3.new_bucket()
    env = s3_trial(master, s3, bucket)
    with build_context(env, retry=FAST_RETRY) as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 4}) as (path, uuid):
            assert not str(path).startswith(bucket)  # a local temporary directory
            (path / "model.bin").write_bytes(b"12345")
            (path / "sub").mkdir()
            (path / "sub" / "opt.bin").write_bytes(b"1")
        assert not path.exists()  # the temporary directory is gone
        with ctx.checkpoint.restore_path(uuid) as restored:
            assert (restored / "model.bin").read_bytes() == b"12345"
            assert (restored / "sub" / "opt.bin").read_bytes() == b"1"
        assert not restored.exists()
        with ctx.checkpoint.restore_path(uuid, selector=lambda p: p == "model.bin") as part:
            assert sorted(p.name for p in part.iterdir()) == ["model.bin"]
        assert ctx.checkpoint.get_metadata(uuid) == {"steps_completed": 4}

    stored = s3.client().cat(f"{bucket}/ckpts/{uuid}/metadata.json")
    assert json.loads(stored) == {"steps_completed": 4}
    with master.client() as http:
        resp = http.get(f"/api/v1/checkpoints/{uuid}", headers=task_headers(env))
    body = resp.json()["checkpoint"]
    assert body["state"] == "STATE_COMPLETED"
    assert body["resources"] == {
        "metadata.json": str(len(stored)),
        "model.bin": "5",
        "sub/": "0",
        "sub/opt.bin": "1",
    }


def test_upload_download_delete_through_s3(
    master: MasterServer, s3: S3Server, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    env = s3_trial(master, s3, bucket)
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "a.pt").write_text("a")
    (src / "d" / "b.pt").write_text("bb")
    with build_context(env, retry=FAST_RETRY) as ctx:
        uuid = ctx.checkpoint.upload(src, {"steps_completed": 3})
        assert not (src / "metadata.json").exists()
        ctx.checkpoint.download(uuid, tmp_path / "dst")
        assert (tmp_path / "dst" / "d" / "b.pt").read_text() == "bb"
        ctx.checkpoint.delete(uuid, globs=["d/*"])
        ctx.checkpoint.delete(uuid)
        with pytest.raises(CheckpointNotFoundError), ctx.checkpoint.restore_path(uuid):
            pass  # pragma: no cover - never entered
    assert s3.client().find(f"{bucket}/ckpts/{uuid}") == []


def test_failures_register_nothing(master: MasterServer, s3: S3Server) -> None:
    bucket = s3.new_bucket()
    env = s3_trial(master, s3, bucket)

    def save_half(ctx: Context) -> None:
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
            (path / "half").write_bytes(b"x")
            raise OSError(f"disk full|{path}|{uuid}")

    with build_context(env, retry=FAST_RETRY) as ctx:
        with pytest.raises(OSError, match="disk full") as info:
            save_half(ctx)
        _, where, uuid = str(info.value).split("|")
        assert not Path(where).exists()
        s3.client().rm(bucket, recursive=True)  # the bucket disappears: the upload fails
        with (
            pytest.raises(StorageError, match="failed"),
            ctx.checkpoint.store_path({"steps_completed": 2}) as (_, failed),
        ):
            pass
    with master.state.sessions() as session:  # reported as failed: ERROR, no files
        for storage_id in (uuid, failed):
            row = session.get(Checkpoint, storage_id)
            assert row is not None
            assert (row.state, row.resources) == ("ERROR", {})
