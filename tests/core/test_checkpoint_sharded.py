"""Sharded checkpoints (``store_path``/``upload`` with ``shard=True``) across real processes.

Each scenario runs in one spawned process per rank (``tests.core.test_distributed_processes``
starts them with the chief-hosted collectives). The trial scenarios report to a real master
(shared_fs storage, written through per-rank directories and renamed into place); the object
store scenario uses an fsspec store that is not a local path (so checkpoints go through
temporary directories, uploads and shared downloads). Failures must fail every rank the same way
and leave the group usable.

This module imports nothing heavy at the top: spawned workers import it to find the scenarios.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from stalwart.core import DistributedContext, DownloadMode, DummyDistributedContext, TaskEnv
from stalwart.core._checkpoint import LocalCheckpointContext, merge_metadata, merge_resources
from stalwart.core._context import build_context
from stalwart.storage import DirectoryStorage, FsspecStorage, list_local_resources
from tests.core.test_distributed_processes import Layout, free_port, run

if TYPE_CHECKING:
    from tests.core.conftest import MasterServer


def _error(call: Any) -> str:
    """Run ``call``; the ``Class: message`` it raised (every failure here must raise)."""
    try:
        call()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def _store(ckpt: Any, metadata: dict[str, Any], files: dict[str, bytes]) -> str:
    with ckpt.store_path(metadata, shard=True) as (path, storage_id):
        for rel, data in files.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_bytes(data)
    return str(storage_id)


def _failing_block(ckpt: Any, rank: int) -> None:
    with ckpt.store_path({"steps_completed": 1}, shard=True) as (path, storage_id):
        (path / f"r{rank}").write_bytes(b"x")
        if rank == 1:
            raise OSError(f"disk full on rank 1 ({storage_id})")


# Scenarios (module level, so that spawned processes can import them).


def on_a_trial(environ: dict[str, str], work: str, dist: DistributedContext) -> dict[str, Any]:
    env = TaskEnv.from_environ(environ)
    rank = dist.get_rank()
    ctx = build_context(env, distributed=dist)
    ckpt = ctx.checkpoint
    out: dict[str, Any] = {}
    try:
        files = {f"rank{rank}.bin": bytes(rank + 1), f"shared/part{rank}": b"p"}
        if rank == 0:
            files["metadata.json"] = b"{}"  # replaced by the merged metadata
        metadata = {"nested": {f"r{rank}": rank}, f"only{rank}": True}
        if rank == 2:
            metadata["steps_completed"] = 5  # any rank may give it
        uuid = _store(ckpt, metadata, files)
        out["stored"] = uuid
        with ckpt.restore_path(uuid) as path:
            out["restored"] = sorted(list_local_resources(path))
            out["metadata"] = json.loads((path / "metadata.json").read_text())
        mine = Path(work) / f"download{rank}"
        ckpt.download(uuid, mine, selector=lambda p: p == f"rank{rank}.bin")
        out["downloaded"] = sorted(list_local_resources(mine))
        # Ranks 0 and 1 pass the same directory (uploaded once), rank 2 its own.
        src = Path(work) / ("upload-a" if rank < 2 else "upload-b")
        if rank == 0:
            (src / "d").mkdir(parents=True)
            (src / "d" / "a.pt").write_text("a")
        elif rank == 2:
            (src / "d").mkdir(parents=True)
            (src / "d" / "b.pt").write_text("bb")
        dist.barrier()
        out["uploaded"] = ckpt.upload(src, {"steps_completed": 6}, shard=True)
        out["source_left"] = sorted(list_local_resources(src))
        out["none_everywhere"] = _error(
            lambda: ckpt.upload(None, {"steps_completed": 1}, shard=True)
        )
        if rank == 1:
            out["not_chief"] = _error(lambda: _unsharded(ckpt))
        # Failures: the same error on every rank, and the group stays usable.
        out["file_conflict"] = _error(
            lambda: _store(ckpt, {"steps_completed": 1}, {"same.bin": b"x", f"own{rank}": b"y"})
        )
        out["metadata_conflict"] = _error(
            lambda: _store(ckpt, {"steps_completed": rank}, {f"m{rank}": b"m"})
        )
        out["block_failed"] = _error(lambda: _failing_block(ckpt, rank))
        out["after"] = _store(ckpt, {"steps_completed": 9}, {f"last{rank}": b"z"})
    finally:
        ctx.close()
    return out


def _unsharded(ckpt: Any) -> None:
    with ckpt.store_path({"steps_completed": 1}):
        pass  # pragma: no cover - never entered


def through_an_object_store(root: str, work: str, dist: DistributedContext) -> dict[str, Any]:
    from fsspec.implementations.local import LocalFileSystem  # type: ignore[import-untyped]

    rank = dist.get_rank()
    storage = FsspecStorage(LocalFileSystem(auto_mkdir=True), root, url=root)
    ckpt = LocalCheckpointContext(dist, storage)
    out: dict[str, Any] = {}
    uuid = _store(ckpt, {"steps_completed": 3, f"r{rank}": rank}, {f"w/rank{rank}.pt": b"w" * rank})
    out["stored"] = uuid
    out["metadata"] = ckpt.get_metadata(uuid)
    # The node's workers share one download: the union of what their selectors keep.
    with ckpt.restore_path(uuid, selector=lambda p: p == f"w/rank{rank}.pt") as path:
        out["restored"] = sorted(list_local_resources(path))
        out["restore_dir"] = str(path)
    with ckpt.restore_path(uuid, DownloadMode.NoSharedDownload, selector=lambda p: "1" in p) as own:
        out["own"] = sorted(list_local_resources(own))
    ckpt.download(uuid, Path(work) / "shared-download")
    out["shared_download"] = sorted(list_local_resources(Path(work) / "shared-download"))
    src = Path(work) / f"src{rank}"
    src.mkdir()
    (src / f"u{rank}").write_text("u")
    out["uploaded"] = ckpt.upload(src, {"steps_completed": 4}, shard=True)
    out["file_conflict"] = _error(lambda: _store(ckpt, {"steps_completed": 1}, {"same": b"x"}))
    out["block_failed"] = _error(lambda: _failing_block(ckpt, rank))
    return out


# Tests.


def _ok(results: dict[int, tuple[str, Any]], size: int) -> list[dict[str, Any]]:
    assert sorted(results) == list(range(size)), results
    for rank, (outcome, value) in results.items():
        assert outcome == "ok", (rank, value)
    return [results[rank][1] for rank in range(size)]


def _storage_id_in(message: str) -> str:
    return message.split("sharded checkpoint ")[1].split(":")[0].split(" ")[0]


def test_sharded_checkpoints_on_a_trial(master: MasterServer, tmp_path: Path) -> None:
    from stalwart.master.db.tables import Checkpoint
    from tests.core.conftest import new_trial_environ, task_headers

    environ = new_trial_environ(master)
    env = TaskEnv.from_environ(environ)
    assert env is not None
    assert env.trial is not None
    base = Path(env.trial.config["checkpoint_storage"]["host_path"])
    scenario = functools.partial(on_a_trial, environ, str(tmp_path))
    outs = _ok(run(Layout(1, 3, free_port()), scenario), 3)

    def reported(uuid: str) -> dict[str, Any]:
        with master.client() as http:
            resp = http.get(f"/api/v1/checkpoints/{uuid}", headers=task_headers(env))
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()["checkpoint"]
        return body

    # One checkpoint, the same id on every rank, every rank's files, the merged metadata.
    uuid = outs[0]["stored"]
    assert [o["stored"] for o in outs] == [uuid] * 3
    merged = {
        "nested": {"r0": 0, "r1": 1, "r2": 2},
        "only0": True,
        "only1": True,
        "only2": True,
        "steps_completed": 5,
    }
    body = reported(uuid)
    assert body["state"] == "STATE_COMPLETED"
    assert body["metadata"] == merged
    size = str((base / uuid / "metadata.json").stat().st_size)
    assert body["resources"] == {
        "metadata.json": size,
        "rank0.bin": "1",
        "rank1.bin": "2",
        "rank2.bin": "3",
        "shared/": "0",
        "shared/part0": "1",
        "shared/part1": "1",
        "shared/part2": "1",
    }
    assert sorted(p.name for p in base.iterdir() if p.name.startswith(f".{uuid}")) == []
    for rank, out in enumerate(outs):
        assert out["restored"] == sorted(body["resources"])
        assert out["metadata"] == merged
        assert out["downloaded"] == [f"rank{rank}.bin"]
        # Ranks 0 and 1 shared a directory: uploaded once, no conflict.
        assert out["uploaded"] == outs[0]["uploaded"]
        assert out["source_left"] == (["d/", "d/a.pt"] if rank < 2 else ["d/", "d/b.pt"])
        assert "at least one rank must have a checkpoint directory" in out["none_everywhere"]
    assert "non-chief worker (rank=1)" in outs[1]["not_chief"]
    uploaded = reported(outs[0]["uploaded"])
    assert set(uploaded["resources"]) == {"d/", "d/a.pt", "d/b.pt", "metadata.json"}
    assert uploaded["metadata"] == {"steps_completed": 6}

    # Failures: every rank raised, nothing was stored or reported.
    failed: list[str] = []
    for rank, out in enumerate(outs):
        conflict = out["file_conflict"]
        assert conflict.startswith("RuntimeError: refusing to store sharded checkpoint"), conflict
        assert "written by more than one rank:\n    same.bin: ranks 0, 1, 2" in conflict
        assert "own" not in conflict
        keys = out["metadata_conflict"]
        assert "metadata keys have different values on different ranks:" in keys, keys
        assert "steps_completed: ranks 0, 1, 2" in keys
        block = out["block_failed"]
        if rank == 1:  # its own exception
            assert block.startswith("OSError: disk full on rank 1"), block
        else:
            assert block.startswith("RuntimeError: sharded checkpoint"), block
            assert "rank 1: OSError: disk full on rank 1" in block
            failed.append(_storage_id_in(block))
        failed += [_storage_id_in(conflict), _storage_id_in(keys)]
        assert out["after"] == outs[0]["after"]
    assert len(set(failed)) == 3
    with master.state.sessions() as session:
        for bad in failed:
            assert session.get(Checkpoint, bad) is None
    left = {p.name for p in base.iterdir()}
    assert not any(bad in name for bad in failed for name in left)
    assert set(reported(outs[0]["after"])["resources"]) == {
        "last0",
        "last1",
        "last2",
        "metadata.json",
    }


def test_sharded_checkpoints_through_an_object_store(tmp_path: Path) -> None:
    root = tmp_path / "store"
    scenario = functools.partial(through_an_object_store, str(root), str(tmp_path))
    outs = _ok(run(Layout(1, 3, free_port()), scenario), 3)
    uuid = outs[0]["stored"]
    storage = DirectoryStorage(root)
    assert storage.list_resources(uuid) == {
        "metadata.json": storage.list_resources(uuid)["metadata.json"],
        "w/": 0,
        "w/rank0.pt": 0,
        "w/rank1.pt": 1,
        "w/rank2.pt": 2,
    }
    every = ["w/", "w/rank0.pt", "w/rank1.pt", "w/rank2.pt"]
    for out in outs:
        assert out["stored"] == uuid
        assert out["metadata"] == {"steps_completed": 3, "r0": 0, "r1": 1, "r2": 2}
        assert out["restored"] == every  # one download for the node: the selectors' union
        assert out["restore_dir"] == outs[0]["restore_dir"]
        assert out["own"] == ["w/", "w/rank1.pt"]
        assert out["shared_download"] == ["metadata.json", *every]
        assert out["uploaded"] == outs[0]["uploaded"]
        assert "same: ranks 0, 1, 2" in out["file_conflict"]
    assert not Path(outs[0]["restore_dir"]).exists()  # removed after every block ended
    assert sorted(storage.list_resources(outs[0]["uploaded"])) == [
        "metadata.json",
        "u0",
        "u1",
        "u2",
    ]
    # The failed checkpoints left nothing in the store.
    assert sorted(p.name for p in root.iterdir()) == sorted([uuid, outs[0]["uploaded"]])


def test_sharded_checkpoints_with_one_rank(tmp_path: Path) -> None:
    ckpt = LocalCheckpointContext(DummyDistributedContext(), DirectoryStorage(tmp_path / "c"))
    uuid = _store(ckpt, {"steps_completed": 1}, {"a/b": b"b"})
    assert ckpt.get_metadata(uuid) == {"steps_completed": 1}
    assert sorted(list_local_resources(tmp_path / "c" / uuid)) == ["a/", "a/b", "metadata.json"]
    src = tmp_path / "src"
    (src / "empty").mkdir(parents=True)
    again = ckpt.upload(src, {"steps_completed": 2}, shard=True)
    assert sorted(list_local_resources(tmp_path / "c" / again)) == ["empty/", "metadata.json"]
    with pytest.raises(ValueError, match="'steps_completed'"), ckpt.store_path({}, shard=True):
        pass  # pragma: no cover - never entered
    with pytest.raises(RuntimeError, match=r"upload\(ckpt_dir=None, shard=False\)"):
        ckpt.upload(None, {"steps_completed": 1})
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == sorted([uuid, again])


def test_merge_metadata() -> None:
    merged, conflicts = merge_metadata(
        [
            {"steps_completed": 1, "a": {"x": 1}, "l": [1]},
            {"steps_completed": 1, "a": {"y": 2}, "b": 2},
            {"a": {"x": 1, "z": {"deep": 3}}, "l": [1]},
        ]
    )
    assert merged == {
        "steps_completed": 1,
        "a": {"x": 1, "y": 2, "z": {"deep": 3}},
        "l": [1],
        "b": 2,
    }
    assert conflicts == {}
    _, conflicts = merge_metadata([{"a": {"x": 1}, "k": 1}, {"a": {"x": 2}}, {"a": 3, "k": 1}])
    assert conflicts == {"a": [0, 1, 2], "a/x": [0, 1]}


def test_merge_resources() -> None:
    merged, conflicts = merge_resources([{"d/": 0, "d/a": 1}, {"d/": 0, "d/b": 2}, {}])
    assert merged == {"d/": 0, "d/a": 1, "d/b": 2}
    assert conflicts == {}
    _, conflicts = merge_resources([{"x": 1, "d": 1}, {"x": 1}, {"d/": 0, "d/e": 1}])
    assert conflicts == {"d": [0, 2], "x": [0, 1]}
