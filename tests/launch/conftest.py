"""Helpers for the launcher tests: a fake task environment a container would get, and torch.

Tests that run ``torch.distributed.run`` need torch (the ``torch`` extra, which ``make install``
installs), those that run DeepSpeed's launcher the ``deepspeed`` extra; without them they skip,
except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def require_torch() -> None:
    """Skip (fail under CI=true) when torch is not installed."""
    if importlib.util.find_spec("torch") is not None:  # not imported: it is slow, and noisy
        return
    if os.environ.get("CI") == "true":
        pytest.fail("torch is required under CI=true (pip install -e '.[torch]')")
    pytest.skip("torch is not installed (pip install -e '.[torch]')")


def require_deepspeed() -> None:
    """Skip (fail under CI=true) when DeepSpeed is not installed."""
    require_torch()
    if importlib.util.find_spec("deepspeed") is not None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("deepspeed is required under CI=true (pip install -e '.[deepspeed]')")
    pytest.skip("deepspeed is not installed (pip install -e '.[deepspeed]')")


DEEPSPEED_BUILD_TIMEOUT_S = 900
"""How long building DeepSpeed's shared-memory collective may take (about 25 s on a quiet
2-core machine, much more on a busy one)."""
STALE_BUILD_LOCK_S = 900
"""A build lock older than this was left by a build that was killed."""

_BUILD_SHM_COMM = f"""
import os, time
from torch.utils.cpp_extension import _get_build_directory
from deepspeed.accelerator import get_accelerator
builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
if builder is not None:
    lock = os.path.join(_get_build_directory(builder.NAME, False), "lock")
    if os.path.exists(lock) and time.time() - os.path.getmtime(lock) > {STALE_BUILD_LOCK_S}:
        os.remove(lock)
    builder.load()
"""


@pytest.fixture(scope="session")
def deepspeed_comm_built() -> None:
    """DeepSpeed's CPU accelerator compiles its shared-memory collective (``shm_comm``) the
    first time a process group starts, under a lock file in torch's extensions directory (kept
    between runs). It is built here once, with a timeout of its own, so that the launch tests'
    timeouts measure launches. A lock left by a build that was killed makes every later build
    wait forever: one older than :data:`STALE_BUILD_LOCK_S` is removed first.

    The build runs with the ``PATH`` a task gets (:func:`task_environ`: the Python environment's
    ``bin`` first), so that it uses the same ``ninja`` as the launched workers: the ``ninja``
    package's (1.13) and Debian's (1.11) hash the commands in ``.ninja_log`` differently, so
    each took the other's build for a stale one and compiled again (a minute and a half each on
    two busy cores), in every run."""
    require_deepspeed()
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    try:
        done = subprocess.run(
            [sys.executable, "-c", _BUILD_SHM_COMM],
            capture_output=True,
            text=True,
            timeout=DEEPSPEED_BUILD_TIMEOUT_S,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"building DeepSpeed's shm_comm took over {DEEPSPEED_BUILD_TIMEOUT_S} s")
    assert done.returncode == 0, done.stdout + done.stderr


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie is dead too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def task_environ(
    run_dir: Path,
    *,
    slots: int,
    addrs: list[str] | None = None,
    rank: int = 0,
) -> dict[str, str]:
    """The environment (and ``rendezvous.json``) of container ``rank`` of a COMMAND task with
    ``slots`` slots here; the master URL points nowhere (the launcher never calls it)."""
    addrs = addrs or ["127.0.0.1"]
    info = run_dir / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "rendezvous.json").write_text(
        json.dumps(
            {
                "container_addrs": addrs,
                "container_rank": rank,
                "container_slot_counts": [slots] * len(addrs),
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DET_", "STALWART_"))}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env.update(
        {
            "DET_MASTER": "http://127.0.0.1:9",
            "DET_CLUSTER_ID": "c",
            "DET_AGENT_ID": "a1",
            "DET_SLOT_IDS": json.dumps(list(range(slots))),
            "DET_TASK_ID": "t",
            "DET_ALLOCATION_ID": "t.1",
            "DET_SESSION_TOKEN": "token",
            "DET_TASK_TYPE": "COMMAND",
            "DET_RUN_DIR": str(run_dir),
            "C10D_PORT": str(free_port()),
            "INTER_TRAIN_PROCESS_COMM_PORT_1": str(free_port()),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        }
    )
    return env
