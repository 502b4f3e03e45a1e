"""The StorageBackend contract, checked on a local directory and on real servers: S3 (moto), GCS
(gcp-storage-emulator) and Azure Blob (Azurite).

The same tests run against both: upload, download, list, delete, selectors, progress,
idempotence, and what a failure leaves behind.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from stalwart.storage import (
    CheckpointNotFoundError,
    DirectoryStorage,
    FsspecStorage,
    Progress,
    list_local_resources,
)
from tests.storage.azure import AzureServer
from tests.storage.gcs import GCSServer
from tests.storage.s3 import FAST, S3Server

SIZE = 256 * 1200


@pytest.fixture(params=["local", "s3", "gcs", "azure"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FsspecStorage:
    if request.param == "local":
        return DirectoryStorage(tmp_path / "store", retry=FAST)
    if request.param == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        return s3.storage(s3.new_bucket())
    if request.param == "gcs":
        gcs: GCSServer = request.getfixturevalue("gcs_server")
        return gcs.storage(gcs.new_bucket())
    azure: AzureServer = request.getfixturevalue("azure_server")
    return azure.storage(azure.new_container())


def make_checkpoint(root: Path) -> Path:
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "model.bin").write_bytes(bytes(range(256)) * (SIZE // 256))
    (root / "sub" / "opt.pt").write_bytes(b"o" * 10)
    (root / "sub" / "deeper" / "x.txt").write_text("x")
    return root


def files_of(resources: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in resources.items() if not k.endswith("/")}


def test_round_trip(store: FsspecStorage, tmp_path: Path) -> None:
    src = make_checkpoint(tmp_path / "src")
    uploaded = store.upload(src, "ck1")
    expected_files = files_of(list_local_resources(src))
    assert files_of(uploaded) == expected_files
    assert {"sub/", "sub/deeper/"} <= set(uploaded)
    listed = store.list_resources("ck1")
    assert listed == uploaded
    # empty directories exist only where the store keeps directories
    assert ("empty/" in listed) == store.keeps_directories

    dst = tmp_path / "dst"
    assert store.download("ck1", dst) == listed
    assert files_of(list_local_resources(dst)) == expected_files
    assert (dst / "model.bin").read_bytes() == (src / "model.bin").read_bytes()
    assert not list(dst.rglob("*.part"))  # no temporary files left


def test_upload_is_idempotent_and_adds_files(store: FsspecStorage, tmp_path: Path) -> None:
    src = make_checkpoint(tmp_path / "src")
    first = store.upload(src, "ck")
    assert store.upload(src, "ck") == first
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "metadata.json").write_text("{}")
    assert store.upload(extra, "ck") == {"metadata.json": 2}
    assert store.list_resources("ck") == dict(sorted({**first, "metadata.json": 2}.items()))


def test_selectors(store: FsspecStorage, tmp_path: Path) -> None:
    src = make_checkpoint(tmp_path / "src")
    uploaded = store.upload(src, "ck", selector=lambda p: p.startswith("sub/"))
    assert uploaded == {"sub/": 0, "sub/deeper/": 0, "sub/deeper/x.txt": 1, "sub/opt.pt": 10}
    got = store.download("ck", tmp_path / "dst", selector=lambda p: p.endswith(".txt"))
    assert got == {"sub/": 0, "sub/deeper/": 0, "sub/deeper/x.txt": 1}
    assert list_local_resources(tmp_path / "dst") == got


def test_progress_counts_every_byte(store: FsspecStorage, tmp_path: Path) -> None:
    src = make_checkpoint(tmp_path / "src")
    total = sum(files_of(list_local_resources(src)).values())
    seen: list[Progress] = []
    store.upload(src, "ck", progress=seen.append)
    assert seen[0] == Progress(0, total, 0, 3)
    assert seen[-1] == Progress(total, total, 3, 3)
    assert all(a.bytes_done <= b.bytes_done for a, b in itertools.pairwise(seen))
    down: list[Progress] = []
    store.download("ck", tmp_path / "dst", progress=down.append)
    assert down[-1] == Progress(total, total, 3, 3)
    assert seen[-1].fraction == 1.0


def test_delete_globs_then_all(store: FsspecStorage, tmp_path: Path) -> None:
    store.upload(make_checkpoint(tmp_path / "src"), "ck")
    left = store.delete("ck", globs=["sub/*"])
    assert files_of(left) == {"model.bin": SIZE}
    assert store.list_resources("ck") == left
    assert store.delete("ck", globs=["nothing*"]) == left
    assert store.delete("ck") == {}
    with pytest.raises(CheckpointNotFoundError, match="checkpoint ck not found"):
        store.list_resources("ck")
    assert store.delete("ck") == {}  # idempotent
    assert store.delete("ck", globs=["*"]) == {}


def test_deleting_every_file_deletes_the_checkpoint(store: FsspecStorage, tmp_path: Path) -> None:
    store.upload(make_checkpoint(tmp_path / "src"), "ck")
    assert store.delete("ck", globs=["*", "*/*", "*/*/*"]) == {}
    with pytest.raises(CheckpointNotFoundError):
        store.download("ck", tmp_path / "dst")


def test_an_interrupted_upload_leaves_nothing(store: FsspecStorage, tmp_path: Path) -> None:
    src = make_checkpoint(tmp_path / "src")
    stored: list[dict[str, int]] = []

    def interrupt_after_two_files(progress: Progress) -> None:
        if progress.files_done == 2:
            stored.append(store.list_resources("ck"))
            raise KeyboardInterrupt  # not an Exception: the progress callback does not hide it

    with pytest.raises(KeyboardInterrupt):
        store.upload(src, "ck", progress=interrupt_after_two_files)
    assert len(files_of(stored[0])) == 2  # two files had been stored...
    with pytest.raises(CheckpointNotFoundError):
        store.list_resources("ck")  # ...and were removed


def test_a_raising_progress_callback_is_logged_not_raised(
    store: FsspecStorage, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(progress: Progress) -> None:
        raise ValueError("bad callback")

    store.upload(make_checkpoint(tmp_path / "src"), "ck", progress=broken)
    assert len(files_of(store.list_resources("ck"))) == 3
    assert "checkpoint progress callback failed" in caplog.text


def test_bad_storage_ids_and_sources(store: FsspecStorage, tmp_path: Path) -> None:
    for bad in ("", ".", "..", "a/b", "a\\b"):
        with pytest.raises(ValueError, match="invalid checkpoint storage id"):
            store.list_resources(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        store.upload(tmp_path / "missing", "ck")
