"""The horovod launcher: its command (pure), its refusals, and the two wrap_rank layers around
horovodrun (Horovod itself needs building against TensorFlow or torch: not run here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stalwart.core.env import Rendezvous, TaskEnv, TrainPorts
from stalwart.launch._common import LaunchError, Plan
from stalwart.launch.horovod import (
    TAG,
    horovod_argv,
    parse_args,
    performance_args,
    plan_one_container,
)
from tests.launch.conftest import REPO, task_environ


def _env(slots: int, addrs: tuple[str, ...] = ("10.0.0.5",)) -> TaskEnv:
    return TaskEnv(
        master_url="http://m:8080",
        cluster_id="c",
        agent_id="a",
        slot_ids=tuple(range(slots)),
        task_id="t",
        allocation_id="t.1",
        session_token="tok",
        task_type="TRIAL",
        rendezvous=Rendezvous(addrs, 0, (slots,) * len(addrs)),
        ports=TrainPorts(c10d=29401),
    )


def test_one_container_only() -> None:
    assert plan_one_container(_env(2)) == Plan(1, 2, 0, "127.0.0.1", 29401, "127.0.0.1")
    with pytest.raises(LaunchError, match=r"horovod runs a trial in one container.*ssh"):
        plan_one_container(_env(1, ("10.0.0.5", "10.0.0.6")))
    with pytest.raises(LaunchError, match="horovod needs at least one slot"):
        plan_one_container(_env(0))


def test_performance_arguments_follow_the_optimizations() -> None:
    tail = [
        "--cache-capacity",
        "1024",
        "--no-hierarchical-allreduce",
        "--no-hierarchical-allgather",
    ]
    assert performance_args({}) == ["--fusion-threshold-mb", "64", "--cycle-time-ms", "5", *tail]
    assert performance_args({"tensor_fusion_threshold": 32, "tensor_fusion_cycle_time": 2}) == [
        "--fusion-threshold-mb",
        "32",
        "--cycle-time-ms",
        "2",
        *tail,
    ]
    assert performance_args({"auto_tune_tensor_fusion": True}) == [
        "--autotune",
        "--autotune-log-file",
        "/tmp/autotune_log.csv",
        *tail,
    ]


def test_the_horovod_command() -> None:
    plan = Plan(1, 2, 0, "127.0.0.1", 29401, "127.0.0.1")
    argv = horovod_argv(plan, {}, ["--verbose"], ["py", "train.py"], horovodrun="hr", python="py")
    wrap = ["py", "-m", "stalwart.launch.wrap_rank"]
    assert argv == [
        *wrap,
        "--no-rank",
        "--strip",
        TAG,
        "--",
        "hr",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--start-timeout",
        "1200",
        "--gloo-timeout-seconds",
        "240",
        *performance_args({}),
        "--verbose",
        *wrap,  # no `--` before it: horovodrun would keep it in the command
        "--rank-env",
        "HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK",
        "--",
        "py",
        "train.py",
    ]
    assert parse_args(["-np", "1", "--", "python3", "t.py"]) == (
        ["-np", "1"],
        None,
        ["python3", "t.py"],
    )


def _run(
    args: list[str], env: dict[str, str], cmd: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args, *cmd],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_without_horovodrun_or_with_two_containers_the_launcher_says_so(tmp_path: Path) -> None:
    env = task_environ(tmp_path / "run", slots=1)
    env["PATH"] = str(Path(sys.executable).parent)  # no horovodrun there
    done = _run(["stalwart.launch.horovod", "python3", "x.py"], env)
    assert done.returncode == 2
    assert "horovodrun is not on PATH" in done.stderr
    env = task_environ(tmp_path / "run2", slots=1, addrs=["10.0.0.5", "10.0.0.6"])
    done = _run(["stalwart.launch.horovod", "python3", "x.py"], env)
    assert done.returncode == 2
    assert "horovod runs a trial in one container" in done.stderr


def test_the_two_wrap_rank_layers_give_horovod_lines_their_rank(tmp_path: Path) -> None:
    """Inner layer: the rank from Horovod's variable; outer layer: horovodrun's tags removed
    (simulated here by a command that tags lines as Gloo and Open MPI do)."""
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": str(Path(sys.executable).parent)}
    inner = _run(
        ["stalwart.launch.wrap_rank", "--rank-env", "HOROVOD_RANK,OMPI_COMM_WORLD_RANK", "--"],
        {**env, "OMPI_COMM_WORLD_RANK": "3"},
        (sys.executable, "-c", "print('hello')"),
    )
    assert inner.stdout == "[rank=3] hello\n"
    tagged = (
        "import sys\n"
        "print('[0]<stdout>:[rank=0] gloo')\n"
        "print('[1,1]<stdout>:[rank=1] mpi')\n"
        "print('[0]<stdout>:not a worker line')\n"
        "print('[1]<stderr>:[rank=1] oops', file=sys.stderr)\n"
    )
    outer = _run(
        ["stalwart.launch.wrap_rank", "--no-rank", "--strip", TAG, "--"],
        {**env, "RANK": "7"},  # --no-rank: RANK is not read
        (sys.executable, "-c", tagged),
    )
    assert outer.returncode == 0
    assert outer.stdout.splitlines() == [
        "[rank=0] gloo",
        "[rank=1] mpi",
        "[0]<stdout>:not a worker line",
    ]
    assert outer.stderr == "[rank=1] oops\n"
