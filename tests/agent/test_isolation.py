"""Private mount namespaces for local tasks: nsexec's command line, the binds of a task, the
probe, and real tasks started by ProcessRunner through nsexec (their own /run/determined, the
group, signals, exit codes and the exit hint kept); without namespaces, the fallback that runs
tasks written for the official harness one at a time with the fixed paths linked to theirs."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from stalwart.agent import fixedpaths, nsexec
from stalwart.agent.isolation import (
    FALLBACK_TASK_NOTE,
    RUN_DIR_TARGET,
    SHARED_FS_TARGET,
    FixedPaths,
    MountNamespaces,
    probe,
    shared_fs_host_path,
    task_binds,
    uses_official_harness,
)
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.runner import ContainerStartError, ProcessRunner
from stalwart.agent.workspace import Workspace
from tests.agent.conftest import wait_for
from tests.agent.test_runner import Sink, finish, spec, workspace


def _config_env(storage: object) -> dict[str, str]:
    return {"DET_EXPERIMENT_CONFIG": json.dumps({"checkpoint_storage": storage})}


# --- pure parts ----------------------------------------------------------------------------------


def test_nsexec_arguments() -> None:
    args = ["--user", "--bind", "/a:/run/determined", "--bind", "/b:c:/d", "--", "sh", "-c", "x"]
    assert nsexec.parse_args(args) == nsexec.Options(
        binds=[("/a", "/run/determined"), ("/b:c", "/d")], user=True, argv=["sh", "-c", "x"]
    )
    assert nsexec.parse_args(["--check", "--bind", "/a:/b"]) == nsexec.Options(
        binds=[("/a", "/b")], check=True
    )
    switched = nsexec.parse_args(["--as", "65534:65533", "--chdir", "/w", "--", "x"])
    assert (switched.identity, switched.chdir, switched.argv) == ((65534, 65533), "/w", ["x"])
    for bad in (
        ["--bind", "nocolon", "--", "x"],
        ["--what", "--", "x"],
        ["--bind", "/a:/b"],
        ["--as", "nobody", "--", "x"],
    ):
        assert nsexec.main(bad) == nsexec.EXIT_FAILED


def test_wrap() -> None:
    spaces = MountNamespaces(python="/py", user=True)
    assert spaces.wrap(["a", "b"], [("/s", "/t")]) == [
        "/py", "-I", "-m", "stalwart.agent.nsexec", "--user", "--bind", "/s:/t", "--", "a", "b",
    ]  # fmt: skip
    assert MountNamespaces(python="/py").wrap(["a"], [("/s", "/t")], check=True) == [
        "/py", "-I", "-m", "stalwart.agent.nsexec", "--bind", "/s:/t", "--check",
    ]  # fmt: skip


def test_shared_fs_host_path() -> None:
    def host_path(env: dict[str, str]) -> str | None:
        return shared_fs_host_path(spec("", env=env))

    assert host_path(_config_env({"type": "shared_fs", "host_path": "/ckpt"})) == "/ckpt"
    assert host_path(_config_env({"type": "s3", "bucket": "b"})) is None
    assert host_path(_config_env({"type": "shared_fs", "host_path": "relative"})) is None
    assert host_path({"DET_EXPERIMENT_CONFIG": "not json"}) is None
    assert host_path({}) is None


def test_task_binds(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws.workdir / "pkg").mkdir()
    (ws.workdir / "pkg" / "model.py").write_text("x = 1")
    shared = tmp_path / "shared" / "ckpt"
    binds = task_binds(
        spec("", env=_config_env({"type": "shared_fs", "host_path": str(shared)})), ws
    )
    assert binds == [
        (str(ws.run_dir), RUN_DIR_TARGET),
        (str(ws.workdir), f"{RUN_DIR_TARGET}/workdir"),
        (str(shared), SHARED_FS_TARGET),
    ]
    assert shared.is_dir()
    assert (ws.run_dir / "workdir").is_dir()
    copy = ws.run_dir / "train" / "model" / "pkg" / "model.py"
    assert copy.read_text() == "x = 1"  # the model definition, for the harness
    assert copy.stat().st_ino == (ws.workdir / "pkg" / "model.py").stat().st_ino
    assert task_binds(spec(""), ws)[2:] == []


def _model(root: Path, source: str) -> Path:
    """A workdir holding one model file with ``source``."""
    root.mkdir(parents=True)
    (root / "train.py").write_text(source)
    return root


@pytest.mark.parametrize(
    ("source", "argv", "official"),
    [
        ("import determined as det\n", ["python3", "train.py"], True),
        ("from determined.core import init\n", ["python3", "train.py"], True),
        ("import stalwart as det\n", ["python3", "train.py"], False),
        ("def broken(:\n", ["python3", "train.py"], False),  # unreadable files are skipped
        ("", ["sh", "-c", "python3 -m determined.launch.torch_distributed python3 t.py"], True),
        ("", ["sh", "-c", "python3 -m stalwart.launch.torch_distributed python3 t.py"], False),
    ],
)
def test_a_task_is_for_the_official_harness_when_it_imports_determined(
    tmp_path: Path, source: str, argv: list[str], official: bool
) -> None:
    assert uses_official_harness(argv, _model(tmp_path / "m", source)) is official


def test_auto_wraps_only_tasks_written_for_the_official_harness(
    spaces: MountNamespaces, tmp_path: Path
) -> None:
    runner = ProcessRunner(spaces)
    for experiment, source, wrapped in (
        ("1", "import stalwart as det\n", False),
        ("2", "import determined as det\n", True),
    ):
        ws = workspace(tmp_path / f"ws-{experiment}")
        (ws.workdir / "train.py").write_text(source)
        task = spec("print('hi')", task_id=f"{experiment}.abc", allocation_id=f"{experiment}.abc.1")
        argv, _ = runner.command(task, ws)
        assert ("stalwart.agent.nsexec" in argv) is wrapped, argv
    every = ProcessRunner(spaces, every_task=True)
    argv, _ = every.command(spec("print('hi')"), workspace(tmp_path / "ws-every"))
    assert "stalwart.agent.nsexec" in argv


def test_probe_reports_why_it_fails(tmp_path: Path) -> None:
    found = probe(tmp_path, python="/bin/false")
    assert isinstance(found, str)
    assert "exit code 1" in found
    assert list(tmp_path.iterdir()) == []  # the scratch directories are gone


# --- real namespaces -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spaces(tmp_path_factory: pytest.TempPathFactory) -> MountNamespaces:
    found = probe(tmp_path_factory.mktemp("probe"))
    if isinstance(found, str):
        pytest.skip(f"no mount namespaces here: {found}")
    return found


SHOW = (
    "import json, os, time\n"
    "print(open('/run/determined/info/cluster.json').read(), flush=True)\n"
    "print(json.dumps(sorted(os.listdir('/determined_shared_fs'))), flush=True)\n"
    "print(os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid(), flush=True)\n"
    "time.sleep(float(os.environ.get('HOLD', '0')))\n"
    "raise SystemExit(int(os.environ.get('CODE', '0')))\n"
)


def _task(tmp_path: Path, name: str, shared: Path, **env: str) -> tuple[Workspace, TaskSpec]:
    ws = workspace(tmp_path / name, **env)
    (ws.run_dir / "info").mkdir()
    (ws.run_dir / "info" / "cluster.json").write_text(name)
    config = _config_env({"type": "shared_fs", "host_path": str(shared)})
    return ws, spec(SHOW, env=config, allocation_id=f"{name}.1")


def test_each_task_sees_its_own_run_dir(spaces: MountNamespaces, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "ckpt-1").mkdir()
    runner, hints = ProcessRunner(spaces, every_task=True), threading.Semaphore(0)
    runner.on_exit = hints.release
    started = []
    for name, code in (("one", "0"), ("two", "7")):
        ws, task = _task(tmp_path, name, shared, HOLD="0.5", CODE=code)
        sink = Sink()
        started.append((runner.start(task, ws, sink), sink))
    assert [finish(runner, handle) for handle, _ in started] == [0, 7]
    assert hints.acquire(timeout=5)
    assert hints.acquire(timeout=5)
    for (_, sink), name in zip(started, ("one", "two"), strict=True):
        assert sink.text() == [f"{name}\n", '["ckpt-1"]\n', "True True\n"]
    assert os.listdir(RUN_DIR_TARGET) == []  # nothing on the host's mount points
    assert os.listdir(SHARED_FS_TARGET) == []


def test_signals_reach_the_command_and_its_group(spaces: MountNamespaces, tmp_path: Path) -> None:
    script = (
        "import subprocess, time\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print(child.pid, flush=True); time.sleep(60)\n"
    )
    runner, sink = ProcessRunner(spaces, every_task=True), Sink()
    handle = runner.start(spec(script), workspace(tmp_path), sink)
    wait_for("the child to start", lambda: bool(sink.text()))
    runner.terminate(handle)
    assert finish(runner, handle) == -signal.SIGTERM
    orphan = int(sink.text()[0])
    wait_for("the group to die", lambda: not Path(f"/proc/{orphan}").exists() or _zombie(orphan))


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


def test_a_missing_command_is_a_start_failure(spaces: MountNamespaces, tmp_path: Path) -> None:
    runner = ProcessRunner(spaces, every_task=True)
    with pytest.raises(ContainerStartError, match="cannot start 'no-such-command'"):
        runner.start(spec("", argv=["no-such-command"]), workspace(tmp_path), Sink())


# --- no namespace --------------------------------------------------------------------------------


def test_without_namespaces_official_tasks_get_a_note_and_their_own_paths(
    tmp_path: Path,
) -> None:
    runner = ProcessRunner(
        no_namespace_reason="unshare: Operation not permitted",
        fixed_paths=FixedPaths(lock=str(tmp_path / "paths.lock")),
    )
    show = "import os; print(os.path.realpath('/run/determined'))"
    for experiment, source, official in (
        ("1", "import determined as det\n", True),
        ("2", "import stalwart as det\n", False),
    ):
        ws = workspace(tmp_path / f"ws-{experiment}")
        (ws.workdir / "train.py").write_text(source)
        task = spec(show, task_id=f"{experiment}.abc", allocation_id=f"{experiment}.abc.1")
        sink = Sink()
        assert finish(runner, runner.start(task, ws, sink)) == 0
        note = FALLBACK_TASK_NOTE.format(reason="unshare: Operation not permitted") + "\n"
        assert sink.text("stderr") == ([note] if official else [])
        if official:
            assert sink.text() == [f"{ws.run_dir.resolve()}\n"]
            assert os.path.realpath(f"{RUN_DIR_TARGET}/workdir") == str(ws.workdir.resolve())
        else:
            assert sink.text() != [f"{ws.run_dir.resolve()}\n"]


def test_without_namespaces_official_tasks_run_one_at_a_time(tmp_path: Path) -> None:
    """Two tasks started together: the second waits (and says so) until the first has ended,
    and each sees its own /run/determined and /determined_shared_fs the whole time."""
    runner = ProcessRunner(
        no_namespace_reason="off", fixed_paths=FixedPaths(lock=str(tmp_path / "paths.lock"))
    )
    script = (
        "import os, time\n"
        "mine = open('/run/determined/whoami').read()\n"
        "print(time.time(), mine, os.listdir('/determined_shared_fs'), flush=True)\n"
        "time.sleep(1.5)\n"
        "print(time.time(), open('/run/determined/whoami').read(), flush=True)\n"
    )
    started = []
    for name in ("first", "second"):
        ws = workspace(tmp_path / name)
        (ws.workdir / "train.py").write_text("import determined\n")
        (ws.run_dir / "whoami").write_text(name)
        shared = tmp_path / f"shared-{name}"
        (shared / name).mkdir(parents=True)
        task = spec(
            script,
            task_id=f"{name}.abc",
            allocation_id=f"{name}.abc.1",
            env=_config_env({"type": "shared_fs", "host_path": str(shared)}),
        )
        sink = Sink()
        started.append((runner.start(task, ws, sink), sink))
        if name == "first":
            wait_for("the first task to start", lambda: bool(started[0][1].text()))
    spans = []
    for (handle, sink), name in zip(started, ("first", "second"), strict=True):
        assert finish(runner, handle) == 0
        lines = [line.split(" ", 1) for line in sink.text()]
        assert [rest.split(" ", 1)[0] for _, rest in lines] == [name, f"{name}\n"]
        assert f"['{name}']" in sink.text()[0]
        spans.append((float(lines[0][0]), float(lines[1][0])))
    assert spans[0][1] <= spans[1][0], "the second task ran while the first held the paths"
    assert fixedpaths.WAITING + "\n" in started[1][1].text("stderr")
    assert fixedpaths.WAITING + "\n" not in started[0][1].text("stderr")


def test_fixedpaths_arguments_and_links(tmp_path: Path) -> None:
    paths = FixedPaths(python="/py", lock="/l")
    assert paths.wrap(["a"], [("/s", "/t")]) == [
        "/py", "-I", "-m", "stalwart.agent.fixedpaths",
        "--lock", "/l", "--link", "/s:/t", "--", "a",
    ]  # fmt: skip
    assert fixedpaths.parse_args(["--link", "/a:b:/c", "--", "x"]) == (
        fixedpaths.LOCK_PATH,
        [("/a:b", "/c")],
        ["x"],
        None,
    )
    assert fixedpaths.parse_args(["--as", "1:2", "--", "x"])[3] == (1, 2)
    for bad in (["--link", "nocolon", "--", "x"], ["--what", "--", "x"], ["--link", "/a:/b"]):
        assert fixedpaths.main(bad) == fixedpaths.EXIT_FAILED
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()  # an empty mount point is replaced
    fixedpaths.point(str(source), str(target))
    assert target.is_symlink()
    assert target.resolve() == source
    fixedpaths.point(str(tmp_path), str(target))  # a link is re-pointed
    assert target.resolve() == tmp_path
    busy = tmp_path / "busy"
    (busy / "something").mkdir(parents=True)
    with pytest.raises(OSError, match="in use"):
        fixedpaths.point(str(source), str(busy))


def test_namespaces_work_again_after_the_fallback(spaces: MountNamespaces, tmp_path: Path) -> None:
    """The fallback leaves links on the fixed paths; a later probe or namespace task turns them
    back into mount points, even when the link's target is gone."""
    gone = tmp_path / "gone"
    gone.mkdir()
    fixedpaths.point(str(gone), RUN_DIR_TARGET)
    gone.rmdir()
    assert not isinstance(probe(tmp_path / "probe"), str)
    assert not os.path.islink(RUN_DIR_TARGET)
    assert os.path.isdir(RUN_DIR_TARGET)
