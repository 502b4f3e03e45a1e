"""The deepspeed launcher: its hostfile, world info and command (pure), and real
``deepspeed.launcher.launch`` runs in a fake container (rank prefixes, DeepSpeed's variables,
DistributedContext.from_deepspeed, a failing worker stops the others)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stalwart.core.env import Rendezvous, TaskEnv, TrainPorts
from stalwart.launch._common import LaunchError, Plan
from stalwart.launch.deepspeed import (
    Cluster,
    cluster_for,
    deepspeed_argv,
    hostfile_text,
    local_device_ids,
    parse_args,
    world_info,
)
from tests.launch.conftest import alive, task_environ

RUN_TIMEOUT_S = 300
"""A bound on one launch (about 40 s alone; several times that on two busy cores)."""


def _env(
    slots: int, addrs: tuple[str, ...] = ("10.0.0.5",), rank: int = 0, counts: tuple[int, ...] = ()
) -> TaskEnv:
    return TaskEnv(
        master_url="http://m:8080",
        cluster_id="c",
        agent_id="a",
        slot_ids=tuple(range(slots)),
        task_id="t",
        allocation_id="t.1",
        session_token="tok",
        task_type="TRIAL",
        rendezvous=Rendezvous(addrs, rank, counts or (slots,) * len(addrs)),
        ports=TrainPorts(c10d=29401),
    )


def _decode(world: str) -> object:
    return json.loads(base64.urlsafe_b64decode(world))


def test_the_cluster_follows_the_rendezvous() -> None:
    one = cluster_for(_env(2))
    assert one == Cluster(Plan(1, 2, 0, "127.0.0.1", 29401, "127.0.0.1"), ("10.0.0.5",), (2,))
    assert hostfile_text(one) == "localhost slots=2\n"
    two = cluster_for(_env(1, ("10.0.0.5", "10.0.0.6"), rank=1, counts=(2, 1)))
    assert two.plan == Plan(2, 1, 1, "10.0.0.5", 29401, "10.0.0.5")
    assert hostfile_text(two) == "10.0.0.5 slots=2\n10.0.0.6 slots=1\n"
    with pytest.raises(LaunchError, match="deepspeed needs at least one slot"):
        cluster_for(_env(0))
    with pytest.raises(LaunchError, match="inconsistent"):
        cluster_for(_env(2, ("10.0.0.5", "10.0.0.6"), counts=(1, 2)))


def test_world_info_lists_every_container_in_order() -> None:
    cluster = cluster_for(_env(2, ("10.0.0.5", "10.0.0.5", "10.0.0.7"), rank=1, counts=(1, 2, 3)))
    assert _decode(world_info(cluster, [4, 5])) == {
        "container-0": [0],
        "container-1": [4, 5],  # this container's devices; the others only count
        "container-2": [0, 1, 2],
    }


def test_device_ids_keep_the_agents_choice() -> None:
    assert local_device_ids(2, {"CUDA_VISIBLE_DEVICES": "2,3"}) == [2, 3]
    assert local_device_ids(1, {"CUDA_VISIBLE_DEVICES": "GPU-ab"}) == ["GPU-ab"]
    assert local_device_ids(2, {"CUDA_VISIBLE_DEVICES": "2"}) == [0, 1]  # not one per slot
    assert local_device_ids(2, {}) == [0, 1]


def test_the_deepspeed_command() -> None:
    plan = Plan(2, 4, 1, "10.0.0.5", 29401, "10.0.0.5")
    argv = deepspeed_argv(plan, "V0", ["--bind_cores_to_rank"], ["py", "train.py"], python="py")
    assert argv == [
        "py",
        "-u",
        "-m",
        "deepspeed.launcher.launch",
        "--world_info",
        "V0",
        "--node_rank",
        "1",
        "--master_addr",
        "10.0.0.5",
        "--master_port",
        "29401",
        "--no_local_rank",
        "--bind_cores_to_rank",
        "--module",
        "stalwart.launch.wrap_rank",
        "py",
        "train.py",
    ]


def test_overrides_only_before_a_leading_option() -> None:
    assert parse_args(["--bind_cores_to_rank", "--", "python3", "t.py"]) == (
        ["--bind_cores_to_rank"],
        None,
        ["python3", "t.py"],
    )
    # Determined's deepspeed launcher takes no overrides: a script's own `--` passes through.
    assert parse_args(["python3", "t.py", "--", "x"]) == ([], None, ["python3", "t.py", "--", "x"])
    assert parse_args(["--trial", "model_def:MyTrial"]) == ([], "model_def:MyTrial", [])
    assert parse_args(["--", "--trial", "m:T"]) == ([], "m:T", [])


def _launch(
    tmp_path: Path, script: str, *, slots: int = 2, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "script.py").write_text(textwrap.dedent(script))
    env = task_environ(tmp_path / "run", slots=slots)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(
        [sys.executable, "-m", "stalwart.launch.deepspeed", *args, "python3", "script.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def test_outside_a_task_the_launcher_says_so(tmp_path: Path) -> None:
    env = task_environ(tmp_path / "run", slots=1)
    del env["DET_MASTER"]
    done = subprocess.run(
        [sys.executable, "-m", "stalwart.launch.deepspeed", "python3", "x.py"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "stalwart.launch.deepspeed runs inside a trial's task" in done.stderr


def test_two_workers_meet_under_deepspeed_and_every_line_carries_its_rank(
    tmp_path: Path, deepspeed_comm_built: None
) -> None:
    done = _launch(
        tmp_path,
        """
        import os, sys
        import deepspeed, torch
        import torch.distributed as tdist
        import stalwart as det
        deepspeed.init_distributed(dist_backend="gloo")
        total = torch.tensor([tdist.get_rank() + 1])
        tdist.all_reduce(total)
        dist = det.core.DistributedContext.from_deepspeed()
        ranks = dist.allgather(dist.get_rank())
        hostfile = open(os.environ["DET_DEEPSPEED_HOSTFILE_PATH"]).read().strip()
        print("ranks", ranks, "sum", total.item(), "local", dist.get_local_rank(),
              "chief", os.environ["DET_CHIEF_IP"], "hosts", hostfile, "args", sys.argv[1:],
              flush=True)
        dist.close()
        tdist.destroy_process_group()
        """,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = sorted(line for line in done.stdout.splitlines() if "ranks" in line)
    assert lines == [
        f"[rank={r}] ranks [0, 1] sum 3 local {r} chief 127.0.0.1 hosts localhost slots=2 args []"
        for r in (0, 1)
    ], done.stdout + done.stderr


def test_a_failing_worker_stops_the_others_and_the_launcher_fails(
    tmp_path: Path, deepspeed_comm_built: None
) -> None:
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
    assert done.returncode == 3, done.stdout + done.stderr
    assert time.monotonic() - started < 60
    assert "[rank=1] rank 1 fails" in done.stdout
    survivor = int((tmp_path / "pid-0").read_text())
    deadline = time.monotonic() + 10
    while alive(survivor) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(survivor)


def test_two_containers_meet_without_ssh(tmp_path: Path, deepspeed_comm_built: None) -> None:
    """Two containers of one allocation (here on one host) each run the launcher: DeepSpeed's
    per-node launchers find each other through the chief, no ssh involved."""
    (tmp_path / "script.py").write_text(
        textwrap.dedent(
            """
            import os
            import deepspeed, torch
            import torch.distributed as tdist
            import stalwart as det
            deepspeed.init_distributed(dist_backend="gloo")
            total = torch.tensor([tdist.get_rank() + 1])
            tdist.all_reduce(total)
            dist = det.core.DistributedContext.from_deepspeed()
            ranks = dist.allgather((dist.get_rank(), dist.get_cross_rank()))
            print("ranks", ranks, "sum", total.item(), flush=True)
            dist.close()
            tdist.destroy_process_group()
            """
        )
    )
    addrs = ["127.0.0.1", "127.0.0.1"]
    envs = [task_environ(tmp_path / f"run{i}", slots=1, addrs=addrs, rank=i) for i in (0, 1)]
    for key in ("C10D_PORT", "INTER_TRAIN_PROCESS_COMM_PORT_1"):
        envs[1][key] = envs[0][key]  # one allocation: the same ports everywhere
    launchers = [
        subprocess.Popen(
            [sys.executable, "-m", "stalwart.launch.deepspeed", "python3", "script.py"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env in envs
    ]
    try:
        outputs = [launcher.communicate(timeout=RUN_TIMEOUT_S) for launcher in launchers]
    finally:
        for launcher in launchers:
            if launcher.poll() is None:
                launcher.kill()
                launcher.communicate()  # reaps it and closes its pipes
    for launcher, (out, err) in zip(launchers, outputs, strict=True):
        assert launcher.returncode == 0, out + err
    lines = [line for out, _ in outputs for line in out.splitlines() if "ranks" in line]
    assert lines == [
        "[rank=0] ranks [(0, 0), (1, 1)] sum 3",
        "[rank=1] ranks [(0, 0), (1, 1)] sum 3",
    ], outputs
