"""The torch_distributed launcher: its command (pure), and real ``torch.distributed.run`` runs
in a fake container (rank prefixes, DistributedContext, a failing worker stops the others)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stalwart.core.env import Rendezvous, TaskEnv, TrainPorts
from stalwart.launch.torch_distributed import (
    LaunchError,
    Plan,
    parse_args,
    plan_for,
    script_argv,
    torch_argv,
)
from tests.launch.conftest import alive, require_torch, task_environ

RUN_TIMEOUT_S = 90


def _env(slots: int, addrs: tuple[str, ...] = ("10.0.0.5",), rank: int = 0) -> TaskEnv:
    return TaskEnv(
        master_url="http://m:8080",
        cluster_id="c",
        agent_id="a",
        slot_ids=tuple(range(slots)),
        task_id="t",
        allocation_id="t.1",
        session_token="tok",
        task_type="TRIAL",
        rendezvous=Rendezvous(addrs, rank, (slots,) * len(addrs)),
        ports=TrainPorts(c10d=29401),
    )


def test_the_plan_follows_the_rendezvous() -> None:
    assert plan_for(_env(2)) == Plan(2 - 1, 2, 0, "127.0.0.1", 29401, "127.0.0.1")
    two = plan_for(_env(1, ("10.0.0.5", "10.0.0.6"), rank=1))
    assert two == Plan(2, 1, 1, "10.0.0.5", 29401, "10.0.0.5")
    with pytest.raises(LaunchError, match="at least one slot"):
        plan_for(_env(0))


def test_the_torch_command() -> None:
    plan = Plan(2, 4, 1, "10.0.0.5", 29401, "10.0.0.5")
    argv = torch_argv(plan, ["--monitor_interval", "1"], ["py", "train.py"], python="py")
    assert argv == [
        "py",
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "4",
        "--node_rank",
        "1",
        "--master_addr",
        "10.0.0.5",
        "--master_port",
        "29401",
        "--rdzv_backend",
        "static",
        "--max_restarts",
        "0",
        "--monitor_interval",
        "1",
        "--module",
        "stalwart.launch.wrap_rank",
        "py",
        "train.py",
    ]


def test_arguments_and_scripts() -> None:
    assert parse_args(["python3", "train.py", "--lr", "1"]) == (
        [],
        None,
        ["python3", "train.py", "--lr", "1"],
    )
    assert parse_args(["--nproc_per_node", "1", "--", "python3", "t.py"]) == (
        ["--nproc_per_node", "1"],
        None,
        ["python3", "t.py"],
    )
    assert parse_args(["--trial", "model_def:MyTrial"]) == ([], "model_def:MyTrial", [])
    assert script_argv(["train.py", "--x"], None, python="py") == ["py", "train.py", "--x"]
    assert script_argv(["sh", "-c", "true"], None) == ["sh", "-c", "true"]
    with pytest.raises(LaunchError, match="no script"):
        script_argv([], None)
    with pytest.raises(LaunchError, match="extra arguments"):
        script_argv(["x"], "model_def:MyTrial")


def test_a_legacy_trial_without_determined_is_a_clear_error() -> None:
    if importlib.util.find_spec("determined") is not None:
        pytest.skip("determined is installed here")
    for args in (["--trial", "model_def:MyTrial"], ["model_def:MyTrial"]):
        with pytest.raises(LaunchError, match=r"legacy Trial class.*install the `determined`"):
            script_argv(*parse_args(args)[2:], parse_args(args)[1])


def _launch(
    tmp_path: Path, script: str, *, slots: int = 2, timeout: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "script.py").write_text(textwrap.dedent(script))
    env = task_environ(tmp_path / "run", slots=slots)
    return subprocess.run(
        [sys.executable, "-m", "stalwart.launch.torch_distributed", "python3", "script.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_outside_a_task_the_launcher_says_so(tmp_path: Path) -> None:
    env = task_environ(tmp_path / "run", slots=1)
    del env["DET_MASTER"]
    done = subprocess.run(
        [sys.executable, "-m", "stalwart.launch.torch_distributed", "python3", "x.py"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "runs inside a trial's task" in done.stderr


def test_two_workers_meet_and_every_line_carries_its_rank(tmp_path: Path) -> None:
    require_torch()
    done = _launch(
        tmp_path,
        """
        import os
        import stalwart as det
        dist = det.core.DistributedContext.from_torch_distributed()
        ranks = dist.allgather(dist.get_rank())
        print("ranks", ranks, "chief", os.environ["DET_CHIEF_IP"], flush=True)
        dist.close()
        """,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = sorted(line for line in done.stdout.splitlines() if "ranks" in line)
    assert lines == [
        "[rank=0] ranks [0, 1] chief 127.0.0.1",
        "[rank=1] ranks [0, 1] chief 127.0.0.1",
    ], done.stdout + done.stderr


def test_a_failing_worker_stops_the_others_and_the_launcher_fails(tmp_path: Path) -> None:
    require_torch()
    started = time.monotonic()
    done = _launch(
        tmp_path,
        """
        import os, pathlib, sys, time
        rank = int(os.environ["RANK"])
        pathlib.Path(f"pid-{rank}").write_text(str(os.getpid()))
        if rank == 1:
            time.sleep(0.5)
            print("rank 1 fails", flush=True)
            sys.exit(3)
        time.sleep(120)  # would hang the trial if nobody stopped it
        """,
    )
    assert done.returncode != 0
    assert time.monotonic() - started < 45
    assert "[rank=1] rank 1 fails" in done.stdout
    survivor = int((tmp_path / "pid-0").read_text())
    deadline = time.monotonic() + 10
    while alive(survivor) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(survivor)


def test_killing_the_container_leaves_no_worker_behind(tmp_path: Path) -> None:
    require_torch()
    (tmp_path / "script.py").write_text(
        "import os, pathlib, time\n"
        "pathlib.Path(f\"pid-{os.environ['RANK']}\").write_text(str(os.getpid()))\n"
        "time.sleep(120)\n"
    )
    env = task_environ(tmp_path / "run", slots=2)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "stalwart.launch.torch_distributed", "python3", "script.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a container: the agent kills its process group
    )
    workers: list[int] = []
    try:
        pids = tmp_path / "pid-0", tmp_path / "pid-1"
        deadline = time.monotonic() + 60
        while not all(p.exists() and p.read_text() for p in pids):
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        workers += [int(p.read_text()) for p in pids]
        os.killpg(launcher.pid, signal.SIGKILL)  # as the agent's kill does
        launcher.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(pid) for pid in workers)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        for pid in workers:  # never leave a worker behind, even when the test fails
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
