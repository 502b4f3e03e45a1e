"""TensorBoard files from the Core API: AUTO uploads what the training code writes into
``get_tensorboard_path()`` to the trial's directory in checkpoint storage (Determined's layout);
MANUAL uploads on request; the uploader's rules (changes only, once a second, selector,
mangler, failures)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.core import TaskEnv, TensorboardMode
from stalwart.core._context import build_context
from stalwart.core._tensorboard import TensorboardUploader
from stalwart.storage import DirectoryStorage
from stalwart.storage.tensorboard import TensorboardFiles
from tests.core.conftest import CONFIG, FAST_RETRY, MasterServer, new_trial


def stored_dir(storage_base: Path, env: TaskEnv) -> Path:
    """``<storage base>/<cluster id>/tensorboard/experiment/<e>/trial/<t>``."""
    assert env.trial is not None
    return (
        storage_base
        / env.cluster_id
        / "tensorboard"
        / "experiment"
        / str(env.trial.experiment_id)
        / "trial"
        / str(env.trial.trial_id)
    )


@pytest.fixture
def shared_fs_trial(master: MasterServer, tmp_path: Path) -> Iterator[tuple[TaskEnv, Path]]:
    """A trial whose experiment stores checkpoints in ``shared_fs`` under ``tmp_path``; the
    storage base (host_path + storage_path)."""
    config = CONFIG + (
        f"checkpoint_storage:\n  type: shared_fs\n  host_path: {tmp_path}\n  storage_path: ck\n"
    )
    env = new_trial(master, config)
    yield env, tmp_path / "ck"
    shutil.rmtree(Path("/tmp") / f"tensorboard-{env.allocation_id}-0", ignore_errors=True)


def test_auto_uploads_after_reports_and_at_close(shared_fs_trial: tuple[TaskEnv, Path]) -> None:
    env, base = shared_fs_trial
    stored = stored_dir(base, env)
    with build_context(env, retry=FAST_RETRY) as ctx:
        tb = ctx.train.get_tensorboard_path()
        assert tb.is_dir()
        (tb / "run").mkdir()
        (tb / "run" / "events.out.tfevents.1.host").write_bytes(b"first")
        ctx.train.report_training_metrics(1, {"loss": 1.0})
        assert (stored / "run" / "events.out.tfevents.1.host").read_bytes() == b"first"

        with (tb / "run" / "events.out.tfevents.1.host").open("ab") as events:
            events.write(b"+more")  # within a second of the last upload: kept for later
        with pytest.raises(RuntimeError, match="only be used in MANUAL mode"):
            ctx.train.upload_tensorboard_files()
    assert (stored / "run" / "events.out.tfevents.1.host").read_bytes() == b"first+more"
    assert sorted(p.name for p in (stored / "run").iterdir()) == ["events.out.tfevents.1.host"]


def test_manual_uploads_only_when_asked(shared_fs_trial: tuple[TaskEnv, Path]) -> None:
    env, base = shared_fs_trial
    stored = stored_dir(base, env)
    with build_context(env, retry=FAST_RETRY, tensorboard_mode=TensorboardMode.MANUAL) as ctx:
        tb = ctx.train.get_tensorboard_path()
        (tb / "events.out.tfevents.2").write_bytes(b"e")
        (tb / "notes.txt").write_bytes(b"n")
        ctx.train.report_validation_metrics(1, {"loss": 1.0})
        assert not stored.exists()
        ctx.train.upload_tensorboard_files(
            selector=lambda p: "tfevents" in p.name,
            mangler=lambda p, rank: p.with_name(f"{p.name}#{rank}"),
        )
        assert [p.name for p in stored.iterdir()] == ["events.out.tfevents.2#0"]
    assert [p.name for p in stored.iterdir()] == ["events.out.tfevents.2#0"]  # nothing at close


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_uploader_sends_changes_only_and_at_most_once_a_second(tmp_path: Path) -> None:
    files = TensorboardFiles(DirectoryStorage(tmp_path / "store"), "c", 1, 2)
    local = tmp_path / "tb"
    local.mkdir()
    clock = Clock()
    uploader = TensorboardUploader(files, local, rank=0, clock=clock)
    assert uploader.sync() == []  # nothing written yet
    (local / "a").write_bytes(b"1")
    (local / "b").write_bytes(b"2")
    clock.now += 1.0
    assert uploader.sync() == ["a", "b"]
    (local / "b").write_bytes(b"22")
    clock.now += 0.5
    assert uploader.sync() == []  # too soon
    assert uploader.sync(force=True) == ["b"]
    clock.now += 5
    assert uploader.sync() == []
    assert files.list_files() == {"a": 1, "b": 2}


def test_an_upload_failure_is_logged_and_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "store"
    store.write_text("a file where the storage's directory should be")
    files = TensorboardFiles(DirectoryStorage(store), "c", 1, 2)
    local = tmp_path / "tb"
    local.mkdir()
    (local / "events.out.tfevents.3").write_bytes(b"e")
    uploader = TensorboardUploader(files, local)
    assert uploader.sync(force=True) == []
    assert "could not upload the TensorBoard file" in caplog.text
    store.unlink()
    assert uploader.sync(force=True) == ["events.out.tfevents.3"]


def test_only_the_chief_uploads_in_auto_mode(tmp_path: Path) -> None:
    from stalwart.core._client import Session
    from stalwart.core._train import TrainContext

    files = TensorboardFiles(DirectoryStorage(tmp_path / "store"), "c", 1, 2)
    session = Session("http://127.0.0.1:9", "token")
    train = TrainContext(
        session,
        trial_id=1,
        trial_run_id=1,
        experiment_id=1,
        allocation_id=f"alloc-{tmp_path.name}",
        rank=1,
        tensorboard_files=files,
    )
    tb = train.get_tensorboard_path()
    try:
        (tb / "events.out.tfevents.4").write_bytes(b"e")
        train._after_report()
        train.close()
        assert files.list_files() == {}
    finally:
        session.close()
        shutil.rmtree(tb, ignore_errors=True)
