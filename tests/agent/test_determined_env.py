"""The official harness's environment on a local agent (:mod:`stalwart.agent.determined_env`):
a task that runs ``determined`` while the environment cannot be built fails to start with what
to do, and the trials after it fail at once instead of each running pip again; tasks of
Stalwart's own harness keep the agent's Python; ``--determined-env``; a workspace re-pointed at
the environment's Python.

Real venv and pip, kept offline (``PIP_NO_INDEX``, an empty ``PIP_FIND_LINKS``) so pip fails
within seconds; the working build runs in ``tests/compat/test_det_tutorials.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from stalwart.agent.daemon import Daemon
from stalwart.agent.determined_env import MARKER, DeterminedEnv, DeterminedEnvError, from_option
from stalwart.agent.protocol import ContainerStatus, SyncResponse, TaskSpec
from stalwart.agent.workspace import Workspace
from tests.agent.conftest import PY, Master, task_spec, wait_for
from tests.agent.test_daemon import agent_settings, every_line, make_daemon, output, status
from tests.master.test_allocations_api import TrialEnv


def until_exited(daemon: Daemon, spec: TaskSpec) -> ContainerStatus:
    """Like test_daemon's, with time for a venv to be made on a busy machine."""

    def exited() -> bool:
        daemon.refresh()
        return status(daemon, spec).state == "EXITED"

    wait_for("the container to be reported EXITED", exited, timeout=90)
    return status(daemon, spec)


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip finds no package anywhere (and says so at once)."""
    wheels = tmp_path / "no-wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)


@pytest.fixture
def daemon(master: Master, tmp_path: Path, offline: None) -> Iterator[Daemon]:
    with httpx.Client() as http:
        agent = make_daemon(agent_settings(master.url, tmp_path / "agent"), http)
        agent.determined_env = DeterminedEnv(tmp_path / "cache" / "determined-env")
        yield agent
        agent.shutdown(kill=True, grace=0.0)
        agent.shipper.close(timeout=2.0)


def test_a_harness_task_that_cannot_get_determined_fails_saying_what_to_do(
    daemon: Daemon, master: Master, trial: TrialEnv
) -> None:
    argv = [PY, "-m", "determined.exec.harness", "model_def:Trial"]
    spec = task_spec(trial, "", argv=argv)
    daemon.apply(SyncResponse(start=[spec]))
    final = until_exited(daemon, spec)
    assert final.exit_code is None
    reason = final.exit_reason or ""
    assert reason.startswith("failed to start: tasks that import determined need the official")
    assert "pip install exited with code" in reason
    assert "STALWART_DETERMINED_ENV=/path/to/venv stalwart up" in reason
    lines = "".join(line["log"] for line in every_line(master, daemon, spec.task_id))
    assert "preparing the official Determined harness" in lines  # said in the task's log
    env = daemon.determined_env
    assert env is not None
    assert not (env.path / MARKER).exists()

    started = time.monotonic()  # the next task fails at once with the same advice
    with pytest.raises(DeterminedEnvError) as again:
        env.ensure(lambda line: pytest.fail(f"built again: {line}"))
    assert str(again.value) == reason.removeprefix("failed to start: ")
    assert time.monotonic() - started < 1.0


def test_tasks_of_stalwarts_own_harness_keep_the_agents_python(
    daemon: Daemon, trial: TrialEnv
) -> None:
    script = "import os, sys; print('PY', sys.executable, os.environ['DET_PYTHON_EXECUTABLE'])"
    spec = task_spec(trial, script, argv=["python3", "-c", script])
    daemon.apply(SyncResponse(start=[spec]))
    final = until_exited(daemon, spec)
    assert final.exit_code == 0, final
    assert f"PY {Path(PY).parent}/python3 {PY}" in output(daemon, spec)
    env = daemon.determined_env
    assert env is not None
    assert not env.path.exists()  # nothing was built for it


def test_the_option_names_a_path_turns_it_off_or_takes_the_default(tmp_path: Path) -> None:
    default = from_option(None)
    assert default is not None
    assert default.name.startswith("determined-0.38.1-py3.")
    if os.geteuid() == 0:  # a root agent's tasks may run as other users: a shared place
        assert default.parent == Path("/var/cache/stalwart")
    else:
        assert default.parent.name == "stalwart"
    assert from_option("") == default
    assert from_option("off") is None
    assert from_option(str(tmp_path / "env")) == tmp_path / "env"


def test_a_workspace_moved_to_the_harness_python(tmp_path: Path) -> None:
    venv = tmp_path / "determined-env"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    agent_bin = Path(PY).parent
    workspace = Workspace(
        root=tmp_path,
        run_dir=tmp_path / "run",
        workdir=tmp_path / "workdir",
        python=Path(PY),
        env={"PATH": f"{agent_bin}:/usr/bin", "DET_PYTHON_EXECUTABLE": PY, "KEEP": "1"},
    )
    moved = workspace.with_python(venv / "bin" / "python3")
    assert moved.python == venv / "bin" / "python3"
    # python3 is the harness's; the agent's commands (torchrun...) stay reachable after it
    assert moved.env["PATH"] == f"{venv}/bin:{agent_bin}:/usr/bin"
    assert moved.env["DET_PYTHON_EXECUTABLE"] == str(venv / "bin" / "python3")
    assert moved.env["VIRTUAL_ENV"] == str(venv)
    assert moved.env["KEEP"] == "1"
    assert workspace.env["PATH"] == f"{agent_bin}:/usr/bin"  # the original is left alone
