"""Runners: line splitting, real child processes (output, exit codes, SIGTERM and the SIGKILL
path, leftovers of the group), and the docker/podman command line as a pure function."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from stalwart.agent.containers import (
    ContainerRunner,
    container_env,
    container_name,
    docker_run_argv,
)
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.runner import (
    PID_FILE,
    ContainerStartError,
    Handle,
    LineSplitter,
    ProcessRunner,
    Stdtype,
    kill_leftovers,
)
from stalwart.agent.workspace import Workspace, prepare_workspace
from tests.agent.conftest import PY, wait_for

# --- line splitting ------------------------------------------------------------------------------


def test_splits_on_newline_and_carriage_return_across_chunks() -> None:
    split = LineSplitter()
    assert split.feed(b"a\nb\rc\r") == ["a\n", "b\n", "c\n"]
    assert split.feed(b"\nd") == []  # the "\r\n" split across chunks is one break
    assert split.feed(b"\xc3") == []
    assert split.feed(b"\xa9\r\n\n") == ["d\u00e9\n", "\n"]  # a UTF-8 char split too
    assert split.feed(b"tail") == []
    assert split.finish() == ["tail\n"]
    assert split.finish() == []


def test_long_lines_are_cut() -> None:
    split = LineSplitter(max_line=4)
    assert split.feed(b"abcdefghij") == ["abcd\n", "efgh\n"]
    assert split.finish() == ["ij\n"]


# --- processes ---------------------------------------------------------------------------------


class Sink:
    """Collects lines from the runner's threads."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, Stdtype]] = []
        self.lock = threading.Lock()

    def __call__(self, line: str, stdtype: Stdtype) -> None:
        with self.lock:
            self.lines.append((line, stdtype))

    def text(self, stdtype: Stdtype = "stdout") -> list[str]:
        with self.lock:
            return [line for line, kind in self.lines if kind == stdtype]


def workspace(tmp_path: Path, **env: str) -> Workspace:
    root = tmp_path / "c"
    (root / "run").mkdir(parents=True, exist_ok=True)
    (root / "workdir").mkdir(exist_ok=True)
    base = {"PATH": os.environ.get("PATH", ""), **env}
    return Workspace(root, root / "run", root / "workdir", Path(PY), base)


def spec(script: str, **extra: object) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "allocation_id": "1.abc.1",
            "task_id": "1.abc",
            "rank": 0,
            "container_id": "c0",
            "argv": [PY, "-c", script],
            "token": "t",
            **extra,
        }
    )


def finish(runner: ProcessRunner, handle: Handle) -> int:
    codes: list[int] = []

    def exited() -> bool:
        code = runner.poll(handle)
        if code is not None:
            codes.append(code)
        return bool(codes)

    wait_for("the container to exit", exited)
    return codes[0]


def test_output_exit_code_cwd_and_environment(tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        "print('one'); print(os.getcwd()); print(os.environ['GREETING'])\n"
        "sys.stdout.write('progress 1\\rprogress 2\\r\\n'); sys.stdout.flush()\n"
        "print('oops', file=sys.stderr)\n"
        "sys.stdout.write('no newline at the end')\n"
        "sys.exit(3)\n"
    )
    ws = workspace(tmp_path, GREETING="hello")
    runner, sink = ProcessRunner(), Sink()
    handle = runner.start(spec(script), ws, sink)
    assert handle.pid > 0
    assert finish(runner, handle) == 3
    assert sink.text() == [
        "one\n",
        f"{ws.workdir}\n",
        "hello\n",
        "progress 1\n",
        "progress 2\n",
        "no newline at the end\n",
    ]
    assert sink.text("stderr") == ["oops\n"]
    assert ws.stdout_path.read_text().startswith("one\n")  # the output stays on disk
    assert runner.poll(handle) == 3  # stays reported
    runner.terminate(handle)  # no-ops after the exit
    runner.kill(handle)


def test_terminate_sends_sigterm_to_the_group(tmp_path: Path) -> None:
    runner, sink = ProcessRunner(), Sink()
    script = "import time; print('up', flush=True); time.sleep(60)"
    handle = runner.start(spec(script), workspace(tmp_path), sink)
    wait_for("the child to start", lambda: sink.text() == ["up\n"])
    runner.terminate(handle)
    assert finish(runner, handle) == -signal.SIGTERM


def test_a_child_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    script = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: print('ignoring SIGTERM', flush=True))\n"
        "print('up', flush=True)\n"
        "while True: time.sleep(0.05)\n"
    )
    runner, sink = ProcessRunner(), Sink()
    handle = runner.start(spec(script), workspace(tmp_path), sink)
    wait_for("the child to start", lambda: "up\n" in sink.text())
    runner.terminate(handle)
    wait_for("the child to ignore SIGTERM", lambda: "ignoring SIGTERM\n" in sink.text())
    assert runner.poll(handle) is None
    runner.kill(handle)
    assert finish(runner, handle) == -signal.SIGKILL


def test_what_is_left_of_the_group_dies_with_the_main_process(tmp_path: Path) -> None:
    script = (
        "import subprocess\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print(child.pid, flush=True)\n"
    )
    runner, sink = ProcessRunner(), Sink()
    handle = runner.start(spec(script), workspace(tmp_path), sink)
    assert finish(runner, handle) == 0
    orphan = int(sink.text()[0])

    def gone() -> bool:
        try:
            stat = Path(f"/proc/{orphan}/stat").read_text()
        except FileNotFoundError:
            return True
        return stat.split(") ", 1)[1].startswith("Z")  # a zombie awaiting its reaper

    wait_for("the orphan to die", gone)


def test_start_failures(tmp_path: Path) -> None:
    runner = ProcessRunner()
    with pytest.raises(ContainerStartError, match="cannot start '/nonexistent/python'"):
        runner.start(spec("", argv=["/nonexistent/python"]), workspace(tmp_path), Sink())
    with pytest.raises(ContainerStartError, match="empty command"):
        runner.start(spec("", argv=[]), workspace(tmp_path), Sink())


def test_commands_are_looked_up_on_the_task_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    ws = workspace(tmp_path)
    ws.env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    runner, sink = ProcessRunner(), Sink()
    script = "import sys; print(sys.argv[0])"
    handle = runner.start(spec("", argv=["python3", "-c", script]), ws, sink)
    assert finish(runner, handle) == 0
    assert sink.text() == ["-c\n"]


# --- startup hooks -------------------------------------------------------------------------------


def _hooked(tmp_path: Path, context_hook: str, tcd_hook: str | None) -> tuple[TaskSpec, Workspace]:
    """A spec with a configured hook and a model definition holding ``startup-hook.sh``, in
    a workspace made by :func:`prepare_workspace` (as the agent and batch launchers make it)."""
    blob = tmp_path / "context.tar.gz"
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "startup-hook.sh").write_text(context_hook)
    with tarfile.open(blob, "w:gz") as tar:
        tar.add(tmp_path / "ctx" / "startup-hook.sh", arcname="startup-hook.sh")
    task = spec(
        "import os; print(os.environ['FROM_TCD'], os.environ['FROM_CONTEXT'])",
        has_context=True,
        startup_hook=tcd_hook,
    )
    ws = prepare_workspace(
        task,
        home=tmp_path / "home",
        master_url="http://m:1",
        agent_id="a",
        fetch=lambda _spec: blob.read_bytes(),
        python=Path(PY),
        base_env={"PATH": os.environ.get("PATH", "")},
    )
    return task, ws


def test_startup_hooks_are_sourced_in_order_before_the_command(tmp_path: Path) -> None:
    task, ws = _hooked(
        tmp_path, 'export FROM_CONTEXT="ctx after $FROM_TCD"\n', "export FROM_TCD=tcd"
    )
    runner, sink = ProcessRunner(), Sink()
    assert finish(runner, runner.start(task, ws, sink)) == 0
    assert sink.text() == ["tcd ctx after tcd\n"]
    # Containers source the same hooks, found through DET_RUN_DIR and the working directory.
    engine = ContainerRunner("docker", master_url="http://m:1", agent_id="a")
    argv = engine.command(task.model_copy(update={"image": "img"}), ws)[0]
    assert argv[argv.index("img") + 1 :][:2] == ["bash", "-c"]
    assert argv[-len(task.argv) :] == task.argv


def test_a_failing_startup_hook_ends_the_task_before_its_command(tmp_path: Path) -> None:
    task, ws = _hooked(tmp_path, "false\nexport FROM_CONTEXT=x\n", "export FROM_TCD=tcd")
    runner, sink = ProcessRunner(), Sink()
    assert finish(runner, runner.start(task, ws, sink)) == 1
    assert sink.text() == []
    assert sink.text("stderr")[-1] == (
        "stalwart: the startup hook startup-hook.sh failed with exit code 1: the task's "
        "command did not run. Fix the hook (or remove it) and run the task again.\n"
    )


def test_a_task_without_hooks_runs_its_command_unchanged(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    assert ProcessRunner().command(spec("print(1)"), ws)[0] == [PY, "-c", "print(1)"]


# --- docker / podman -----------------------------------------------------------------------------


def test_docker_run_argv() -> None:
    argv = docker_run_argv(
        "docker",
        image="determinedai/pytorch-ngc:0.38.1",
        argv=["python3", "train.py"],
        env_names=["DET_MASTER", "DET_SESSION_TOKEN"],
        name="stalwart-c0",
        run_dir=Path("/h/tasks/a.1/rank-0/run"),
        workdir=Path("/h/tasks/a.1/rank-0/workdir"),
        device_type="cuda",
        slot_ids=["0", "3"],
        labels={"ai.stalwart.allocation": "a.1", "ai.stalwart.agent": "n1"},
    )
    assert argv == [
        "docker", "run", "--rm", "--name", "stalwart-c0", "--network", "host",
        "--shm-size", "4g",
        "--label", "ai.stalwart.agent=n1", "--label", "ai.stalwart.allocation=a.1",
        "-v", "/h/tasks/a.1/rank-0/run:/run/determined",
        "-v", "/h/tasks/a.1/rank-0/workdir:/run/determined/workdir",
        "-w", "/run/determined/workdir",
        "-e", "DET_MASTER", "-e", "DET_SESSION_TOKEN",
        "--gpus", '"device=0,3"',
        "determinedai/pytorch-ngc:0.38.1", "python3", "train.py",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("engine", "device_type", "flags"),
    [
        ("docker", "cpu", []),
        ("podman", "cuda", ["--device", "nvidia.com/gpu=1", "--device", "nvidia.com/gpu=2"]),
        (
            "docker",
            "rocm",
            ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video"],
        ),
    ],
)
def test_device_flags(engine: str, device_type: str, flags: list[str]) -> None:
    argv = docker_run_argv(
        engine,  # type: ignore[arg-type]
        image="img",
        argv=["x"],
        env_names=[],
        name="n",
        run_dir=Path("/r"),
        workdir=Path("/w"),
        device_type=device_type,  # type: ignore[arg-type]
        slot_ids=["1", "2"],
        labels={},
    )
    assert argv[0] == engine
    assert argv[argv.index("/run/determined/workdir", argv.index("-w")) + 1 : -2] == flags


def test_container_runner_command(tmp_path: Path) -> None:
    runner = ContainerRunner("podman", master_url="http://10.0.0.1:8080", agent_id="n1")
    ws = workspace(tmp_path, DET_RUN_DIR="/host/run", HOME="/home/u")
    task = spec(
        "", image="img:1", env={"DET_SESSION_TOKEN": "s3cret"}, device_type="rocm",
        slot_ids=["1"],
    )  # fmt: skip
    argv, env = runner.command(task, ws)
    assert argv[:2] == ["podman", "run"]
    assert argv[-4:] == ["img:1", PY, "-c", ""]
    assert "s3cret" not in " ".join(argv)
    assert "DET_SESSION_TOKEN" in argv
    assert env["DET_SESSION_TOKEN"] == "s3cret"  # the CLI process carries the values
    assert env["DET_RUN_DIR"] == "/run/determined"
    assert env["HOME"] == "/home/u"
    assert runner.handle_name(task) == container_name("c0") == "stalwart-c0"
    inside = container_env(task, master_url="http://10.0.0.1:8080", agent_id="n1")
    assert inside["ROCR_VISIBLE_DEVICES"] == "1"
    assert inside["DET_WORKDIR"] == "/run/determined/workdir"
    assert (ws.run_dir / "workdir").is_dir()
    with pytest.raises(ContainerStartError, match="names no image"):
        runner.command(spec(""), ws)


def test_kill_leftovers_kills_only_the_recorded_processes(tmp_path: Path) -> None:
    def task(name: str) -> tuple[subprocess.Popen[bytes], Path, str]:
        proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
        pid_dir = tmp_path / "tasks" / name / "rank-0"
        pid_dir.mkdir(parents=True)
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return proc, pid_dir / PID_FILE, fields[19]

    left, left_file, left_start = task("alloc-left")
    other, other_file, other_start = task("alloc-reused")
    try:
        left_file.write_text(f"{left.pid} {left_start}")
        other_file.write_text(f"{other.pid} {int(other_start) - 1}")  # a reused pid: not ours
        (tmp_path / "tasks" / "alloc-left" / "rank-1").mkdir()
        (tmp_path / "tasks" / "alloc-left" / "rank-1" / PID_FILE).write_text("garbage")
        assert kill_leftovers(tmp_path) == ["alloc-left/rank-0"]
        assert left.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for proc in (left, other):
            proc.kill()
            proc.wait()
