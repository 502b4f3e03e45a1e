"""The notebook program: the idle decision and the ready line (pure), its settings, and a real
JupyterLab started by ``python -m stalwart.tasks.notebook`` against a recording master."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart.core.env import TaskEnvError
from stalwart.tasks import notebook
from stalwart.tasks.notebook import (
    IdleState,
    IdleType,
    NotebookSettings,
    decide_idle,
    is_ready_line,
    jupyter_command,
)
from tests.tasks.conftest import (
    ALLOCATION,
    SESSION_TOKEN,
    TOKEN,
    Program,
    Report,
    ReportRecorder,
    free_port,
    require,
    task_environ,
)

START_TIMEOUT_S = 120.0  # JupyterLab starts in a few seconds; the machine may be busy

KERNEL: dict[str, Any] = {
    "id": "k1",
    "name": "python3",
    "last_activity": "2026-01-01T10:00:00.000000Z",
    "execution_state": "idle",
    "connections": 0,
}


# -- the idle decision (Determined's check_idle.py) --------------------------------------------


def test_kernels_or_terminals_is_idle_only_with_nothing_open() -> None:
    mode = IdleType.KERNELS_OR_TERMINALS
    assert decide_idle(mode, [], [], [], IdleState())
    assert not decide_idle(mode, [KERNEL], [], [], IdleState())
    assert not decide_idle(mode, [], [{"name": "1"}], [], IdleState())
    assert not decide_idle(mode, [], [], [{"id": "s"}], IdleState())


def test_kernel_connections_ignores_terminals() -> None:
    mode = IdleType.KERNEL_CONNECTIONS
    assert decide_idle(mode, [KERNEL], [{"name": "1"}], [{"id": "s"}], IdleState())
    assert not decide_idle(mode, [KERNEL, {**KERNEL, "connections": 2}], [], [], IdleState())
    assert decide_idle(mode, [], [], [], IdleState())


def test_activity_is_busy_while_executing_or_when_activity_moved() -> None:
    mode = IdleType.ACTIVITY
    state = IdleState()
    assert not decide_idle(mode, [KERNEL], [], [], state)  # first sight of activity
    assert decide_idle(mode, [KERNEL], [], [], state)  # nothing new since
    later = {**KERNEL, "last_activity": "2026-01-01T10:05:00.000000Z"}
    terminal = {"name": "1", "last_activity": "2026-01-01T10:01:00.000000Z"}
    assert not decide_idle(mode, [later], [terminal], [], state)
    assert state.last_activity == later["last_activity"]
    assert not decide_idle(mode, [{**later, "execution_state": "busy"}], [], [], state)
    assert decide_idle(mode, [later], [terminal], [], state)
    assert decide_idle(mode, [], [], [], state)  # everything closed: nothing new


def test_idle_type_parses_any_case_and_falls_back() -> None:
    assert IdleType.parse("KERNEL_CONNECTIONS") is IdleType.KERNEL_CONNECTIONS
    assert IdleType.parse("activity") is IdleType.ACTIVITY
    assert IdleType.parse(None) is IdleType.KERNELS_OR_TERMINALS
    assert IdleType.parse("sometimes") is IdleType.KERNELS_OR_TERMINALS


# -- the ready line (captured from JupyterLab 4.6 / jupyter_server 2.21) -----------------------


def test_ready_line() -> None:
    captured = (
        "[I 2026-12-04 03:41:12.118 ServerApp] Jupyter Server 2.21.1 is running at:",
        "[I 2026-12-04 03:41:12.118 ServerApp] http://host:41235/proxy/task-1/lab?token=...",
        "[I 2026-12-04 03:41:11.850 ServerApp] jupyterlab | extension was successfully loaded.",
        "[I 2026-12-04 03:41:12.118 ServerApp] Use Control-C to stop this server and shut down",
    )
    assert [is_ready_line(line) for line in captured] == [True, False, False, False]
    assert is_ready_line("INFO: [ServerApp] Jupyter Server 2.14.0 is running at:")


# -- settings and the command line -------------------------------------------------------------


def test_settings_need_a_token_and_a_sane_interval() -> None:
    env = {"DET_SERVICE_PORT": "8888", "DET_NOTEBOOK_TOKEN": "t", "NOTEBOOK_IDLE_TYPE": "activity"}
    settings = NotebookSettings.from_environ(env, "task-9")
    assert (settings.port, settings.token, settings.base_url) == (8888, "t", "/proxy/task-9/")
    assert settings.idle_type is IdleType.ACTIVITY
    assert settings.idle_report_s == 30.0
    with pytest.raises(TaskEnvError, match="DET_NOTEBOOK_TOKEN"):
        NotebookSettings.from_environ({"DET_SERVICE_PORT": "8888"}, "task-9")
    with pytest.raises(TaskEnvError, match="DET_SERVICE_PORT"):
        NotebookSettings.from_environ({"DET_NOTEBOOK_TOKEN": "t"}, "task-9")
    with pytest.raises(TaskEnvError, match="STALWART_IDLE_REPORT_SECONDS"):
        NotebookSettings.from_environ({**env, "STALWART_IDLE_REPORT_SECONDS": "0"}, "task-9")


def test_command_keeps_the_token_off_the_command_line(tmp_path: Path) -> None:
    settings = NotebookSettings(port=8888, task_id="t1", token="secret", root_dir=tmp_path)
    command = jupyter_command(settings, python="/env/bin/python")
    assert command[:3] == ["/env/bin/python", "-m", "jupyterlab"]
    assert "--ServerApp.base_url=/proxy/t1/" in command
    assert "--ServerApp.ip=0.0.0.0" in command
    assert f"--ServerApp.root_dir={tmp_path}" in command
    assert not any("secret" in arg for arg in command)


def test_main_exits_2_on_a_broken_contract(capsys: pytest.CaptureFixture[str]) -> None:
    env = task_environ("http://127.0.0.1:9", "NOTEBOOK", 8888)  # no DET_NOTEBOOK_TOKEN
    assert notebook.main(env) == 2
    assert "DET_NOTEBOOK_TOKEN" in capsys.readouterr().err


# -- a real JupyterLab -------------------------------------------------------------------------


def _idle_reports(reports: list[Report]) -> list[bool]:
    return [r.body["idle"] for r in reports if r.path.endswith("/report_idle")]


def test_jupyterlab_reports_ready_and_idle_and_stops_on_sigterm(
    recorder: ReportRecorder, tmp_path: Path
) -> None:
    require("jupyterlab", "notebook")
    port = free_port()
    env = task_environ(
        recorder.url,
        "NOTEBOOK",
        port,
        DET_NOTEBOOK_TOKEN=TOKEN,
        NOTEBOOK_IDLE_TYPE="kernels_or_terminals",
        STALWART_IDLE_REPORT_SECONDS="0.5",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "hello.txt").write_text("hi")
    program = Program("notebook", env, workdir)
    try:
        recorder.wait_for(
            "ready", lambda rs: any(r.path.endswith("/ready") for r in rs), START_TIMEOUT_S
        )
        ready = next(r for r in recorder.reports if r.path.endswith("/ready"))
        assert ready.path == f"/api/v1/allocations/{ALLOCATION}/ready"
        assert ready.auth == f"Bearer {SESSION_TOKEN}"
        assert recorder.paths().count(ready.path) == 1

        base = f"http://127.0.0.1:{port}/proxy/task-1"
        status = httpx.get(f"{base}/api/status", params={"token": TOKEN}, timeout=10)
        assert status.status_code == 200, status.text
        assert httpx.get(f"{base}/lab", params={"token": TOKEN}, timeout=10).status_code == 200
        assert httpx.get(f"{base}/api/status", timeout=10).status_code == 403  # no token
        files = httpx.get(f"{base}/api/contents", params={"token": TOKEN}, timeout=10).json()
        assert "hello.txt" in [f["name"] for f in files["content"]]  # root_dir: the workdir

        recorder.wait_for("idle: true", lambda rs: True in _idle_reports(rs), 30)
        kernel = httpx.post(
            f"{base}/api/kernels",
            headers={"Authorization": f"token {TOKEN}"},
            json={"name": "python3"},
            timeout=60,
        )
        assert kernel.status_code == 201, kernel.text
        recorder.wait_for("idle: false", lambda rs: False in _idle_reports(rs), 30)
        idle_paths = {r.path for r in recorder.reports if r.path.endswith("/report_idle")}
        assert idle_paths == {"/api/v1/notebooks/task-1/report_idle"}

        assert program.terminate() in (0, 128 + signal.SIGTERM)
        assert "Jupyter Server" in program.output()  # JupyterLab's log is the task's
        assert TOKEN not in program.output()
    finally:
        program.close()
