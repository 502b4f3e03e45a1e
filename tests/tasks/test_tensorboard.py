"""The TensorBoard program: its sources, the syncer over real local storage, and a real
TensorBoard started by ``python -m stalwart.tasks.tensorboard`` against a recording master."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import httpx
import pytest

from stalwart.core.env import TaskEnvError
from stalwart.storage import DirectoryStorage
from stalwart.storage.tensorboard import TensorboardFiles
from stalwart.tasks import tensorboard
from stalwart.tasks.tensorboard import Source, Syncer, parse_sources, run_name
from tests.tasks.conftest import (
    ALLOCATION,
    Program,
    ReportRecorder,
    free_port,
    require,
    task_environ,
    wait_for_http,
)

START_TIMEOUT_S = 120.0
CLUSTER = "cluster-1"


def write_events(directory: Path, tag: str = "loss", steps: int = 3) -> Path:
    """A real event file written by TensorBoard's own writer; its path."""
    from tensorboard.compat.proto import event_pb2, summary_pb2  # type: ignore[import-untyped]
    from tensorboard.summary.writer.event_file_writer import (  # type: ignore[import-untyped]
        EventFileWriter,
    )

    directory.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(directory))
    for step in range(steps):
        value = summary_pb2.Summary.Value(tag=tag, simple_value=1.0 / (step + 1))
        summary = summary_pb2.Summary(value=[value])
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()
    (path,) = directory.glob("*tfevents*")
    return path


def shared_fs(tmp_path: Path) -> dict[str, str]:
    return {"type": "shared_fs", "host_path": str(tmp_path / "host"), "storage_path": "ckpts"}


def trial_dir(tmp_path: Path, experiment: int, trial: int) -> Path:
    """Where the harness puts a trial's files in :func:`shared_fs` storage."""
    path = tmp_path / "host" / "ckpts" / CLUSTER / "tensorboard" / "experiment"
    return path / str(experiment) / "trial" / str(trial)


# -- sources -----------------------------------------------------------------------------------


def test_sources_parse_and_name_their_runs() -> None:
    storage = {"type": "s3", "bucket": "b"}
    text = json.dumps([{"experiment_id": 3, "trial_id": 7, "storage": storage}])
    (source,) = parse_sources(text)
    assert (source.experiment_id, source.trial_id, source.storage["bucket"]) == (3, 7, "b")
    assert run_name(source) == "experiment_3/trial_7"
    assert parse_sources("[]") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "is not set"),
        ("{", "is not JSON"),
        ("{}", "is not a JSON list"),
        ('[{"experiment_id": "3", "trial_id": 1, "storage": {"type": "s3"}}]', "experiment_id"),
        ('[{"experiment_id": 3, "trial_id": true, "storage": {"type": "s3"}}]', "trial_id"),
        ('[{"experiment_id": 3, "trial_id": 1, "storage": {}}]', r"\[0\]\.storage"),
        ("[1]", r"\[0\] is not an object"),
    ],
)
def test_bad_sources_are_named(text: str | None, message: str) -> None:
    with pytest.raises(TaskEnvError, match=message):
        parse_sources(text)


def test_main_exits_2_on_bad_sources(capsys: pytest.CaptureFixture[str]) -> None:
    env = task_environ("http://127.0.0.1:9", "TENSORBOARD", 6006, DET_TENSORBOARD_SOURCES="{")
    assert tensorboard.main(env) == 2
    assert "DET_TENSORBOARD_SOURCES is not JSON" in capsys.readouterr().err


# -- the syncer --------------------------------------------------------------------------------


def test_syncer_copies_new_files_and_appends_what_grew(tmp_path: Path) -> None:
    source = Source(4, 9, shared_fs(tmp_path))
    remote = trial_dir(tmp_path, 4, 9)
    (remote / "sub").mkdir(parents=True)
    (remote / "sub" / "events.out.tfevents.1.host").write_bytes(b"abc")
    (remote / "plugins.pb").write_bytes(b"p")
    (remote / ".upload-123").write_bytes(b"in flight")
    logdir = tmp_path / "logdir"
    syncer = Syncer([source], CLUSTER, logdir)

    assert syncer.sync() == 2
    local = logdir / "experiment_4" / "trial_9"
    assert (local / "sub" / "events.out.tfevents.1.host").read_bytes() == b"abc"
    assert (local / "plugins.pb").read_bytes() == b"p"
    assert not (local / ".upload-123").exists()
    assert syncer.event_files == {local / "sub" / "events.out.tfevents.1.host"}

    inode = (local / "sub" / "events.out.tfevents.1.host").stat().st_ino
    with (remote / "sub" / "events.out.tfevents.1.host").open("ab") as grow:
        grow.write(b"def")
    assert syncer.sync() == 1
    grown = local / "sub" / "events.out.tfevents.1.host"
    assert grown.read_bytes() == b"abcdef"
    assert grown.stat().st_ino == inode  # appended in place: TensorBoard's open file sees it
    assert syncer.sync() == 0


def test_syncer_skips_a_broken_source_and_keeps_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = Source(1, 1, shared_fs(tmp_path))
    broken = Source(2, 2, {"type": "s3"})  # no bucket: the storage cannot open
    (trial_dir(tmp_path, 1, 1)).mkdir(parents=True)
    (trial_dir(tmp_path, 1, 1) / "events.out.tfevents.x").write_bytes(b"e")
    syncer = Syncer([broken, good], CLUSTER, tmp_path / "logdir")
    assert syncer.sync() == 1
    assert syncer.sync() == 0
    complaints = [r for r in caplog.records if "experiment 2 trial 2" in r.getMessage()]
    assert len(complaints) == 1  # said once, not at every sync


def test_tensorboard_files_upload_then_fetch_through_the_storage_layer(tmp_path: Path) -> None:
    files = TensorboardFiles(DirectoryStorage(tmp_path / "store"), CLUSTER, 5, 6)
    assert files.list_files() == {}
    src = tmp_path / "events.out.tfevents.9"
    src.write_bytes(b"12345")
    files.upload(src, "a/events.out.tfevents.9")
    stored = tmp_path / "store" / CLUSTER / "tensorboard/experiment/5/trial/6/a"
    assert [p.name for p in stored.iterdir()] == ["events.out.tfevents.9"]  # no temporary left
    assert files.list_files() == {"a/events.out.tfevents.9": 5}
    dst = tmp_path / "local" / "e"
    assert files.fetch("a/events.out.tfevents.9", dst, 5) == 5
    assert dst.read_bytes() == b"12345"
    src.write_bytes(b"12")  # rewritten shorter: rewritten here in place
    files.upload(src, "a/events.out.tfevents.9")
    assert files.fetch("a/events.out.tfevents.9", dst, 2) == 2
    assert dst.read_bytes() == b"12"
    with pytest.raises(ValueError, match="cluster id"):
        TensorboardFiles(DirectoryStorage(tmp_path), "../x", 1, 1)


# -- a real TensorBoard ------------------------------------------------------------------------


def test_tensorboard_waits_then_shows_the_trial_and_stops_on_sigterm(
    recorder: ReportRecorder, tmp_path: Path
) -> None:
    require("tensorboard", "tensorboard")
    port = free_port()
    sources = [{"experiment_id": 12, "trial_id": 34, "storage": shared_fs(tmp_path)}]
    env = task_environ(
        recorder.url, "TENSORBOARD", port, DET_TENSORBOARD_SOURCES=json.dumps(sources)
    )
    program = Program("tensorboard", env, tmp_path)
    try:
        recorder.wait_for(
            "waiting", lambda rs: any(r.path.endswith("/waiting") for r in rs), START_TIMEOUT_S
        )
        runs_url = f"http://127.0.0.1:{port}/proxy/task-1/data/runs"
        assert wait_for_http(runs_url, START_TIMEOUT_S, program).json() == []
        assert not any(p.endswith("/ready") for p in recorder.paths())

        trial = trial_dir(tmp_path, 12, 34)
        trial.mkdir(parents=True)
        write_events(trial)
        recorder.wait_for(
            "ready", lambda rs: any(r.path.endswith("/ready") for r in rs), START_TIMEOUT_S
        )
        assert recorder.paths() == [
            f"/api/v1/allocations/{ALLOCATION}/waiting",
            f"/api/v1/allocations/{ALLOCATION}/ready",
        ]
        runs = httpx.get(runs_url, timeout=10).json()
        assert runs == ["experiment_12/trial_34"]
        scalars = httpx.get(
            f"http://127.0.0.1:{port}/proxy/task-1/data/plugin/scalars/scalars",
            params={"run": "experiment_12/trial_34", "tag": "loss"},
            timeout=10,
        )
        assert [point[1] for point in scalars.json()] == [0, 1, 2]

        assert program.terminate() in (0, 128 + signal.SIGTERM)
    finally:
        program.close()


def test_tensorboard_of_finished_trials_is_ready_without_waiting(
    recorder: ReportRecorder, tmp_path: Path
) -> None:
    require("tensorboard", "tensorboard")
    port = free_port()
    for trial in (1, 2):
        write_events(trial_dir(tmp_path, 5, trial) / "train")
    sources = [
        {"experiment_id": 5, "trial_id": trial, "storage": shared_fs(tmp_path)} for trial in (1, 2)
    ]
    env = task_environ(
        recorder.url, "TENSORBOARD", port, DET_TENSORBOARD_SOURCES=json.dumps(sources)
    )
    program = Program("tensorboard", env, tmp_path)
    try:
        recorder.wait_for(
            "ready", lambda rs: any(r.path.endswith("/ready") for r in rs), START_TIMEOUT_S
        )
        assert recorder.paths() == [f"/api/v1/allocations/{ALLOCATION}/ready"]
        runs = httpx.get(f"http://127.0.0.1:{port}/proxy/task-1/data/runs", timeout=10).json()
        assert sorted(runs) == ["experiment_5/trial_1/train", "experiment_5/trial_2/train"]
        assert program.terminate() in (0, 128 + signal.SIGTERM)
    finally:
        program.close()
