"""Warm starts: tasks forked from a warm Python behave as the same command started fresh.

Real processes throughout: a fork server of this interpreter, the tasks it forks, and the same
tasks started cold by :class:`ProcessRunner` for comparison.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.agent.runner import ChildProcess, ProcessRunner
from stalwart.agent.warm import SERVER_LOST, ForkedProcess, ForkServer, WarmStarts, plan
from stalwart.agent.workspace import Workspace
from tests.agent.conftest import PY, wait_for
from tests.agent.test_runner import Sink, finish, spec

BIN = str(Path(PY).parent)
ENV = {
    "PATH": f"{BIN}:{os.environ.get('PATH', os.defpath)}",
    "HOME": os.environ.get("HOME", "/root"),
    "PYTHONUNBUFFERED": "1",
    "GREETING": "hello",
}

PROBE = """\
import atexit, json, os, random, signal, sys, threading, time
import __main__

def later():
    time.sleep(0.3)
    print("thread joined", flush=True)

threading.Thread(target=later).start()  # not a daemon: the exit waits for it
atexit.register(lambda: print("atexit ran", flush=True))
unclosed = open("unclosed.txt", "w")
unclosed.write("kept")  # never closed: flushed at the exit all the same
handlers = {
    name: str(signal.getsignal(getattr(signal, name)))
    for name in ("SIGINT", "SIGTERM", "SIGCHLD", "SIGPIPE", "SIGHUP", "SIGQUIT")
}
print(json.dumps({
    "argv": sys.argv,
    "path": sys.path,
    "cwd": os.getcwd(),
    "env": dict(os.environ),
    "name": __name__,
    "file": __file__,
    "spec": __main__.__spec__ is None,
    "builtins": type(__builtins__).__name__,
    "cached": __main__.__cached__,
    "umask": os.umask(0o022),
    "leads_session": os.getsid(0) == os.getpid() == os.getpgid(0),
    "stdin_devnull": os.path.samestat(os.fstat(0), os.stat(os.devnull)),
    "stdout": [sys.stdout.encoding, sys.stdout.line_buffering, sys.stdout.write_through],
    "stderr": [sys.stderr.encoding, sys.stderr.errors, sys.stderr.line_buffering],
    "handlers": handlers,
    "random": random.random(),
    "parent": os.getppid(),
    # what ps and pgrep -f show (a retitled process pads its command line with NULs)
    "cmdline": open("/proc/self/cmdline").read().replace("\\0", " ").strip(),
    "comm": open("/proc/self/comm").read().strip(),
}), flush=True)
code = sys.argv[1] if len(sys.argv) > 1 else "0"
if code == "raise":
    raise ValueError("the task failed")
sys.exit(int(code) if code.isdigit() else code)
"""


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmStarts]:
    starts = WarmStarts()
    starts.prepare(Path(BIN, "python3"), ENV)
    server = next(iter(starts._servers.values()))
    wait_for("the warm Python to load", server.ready.is_set, timeout=60)
    yield starts
    starts.close()


def _workspace(tmp_path: Path, name: str) -> Workspace:
    root = tmp_path / name
    (root / "run").mkdir(parents=True)
    (root / "workdir").mkdir()
    (root / "workdir" / "probe.py").write_text(PROBE)
    return Workspace(root, root / "run", root / "workdir", Path(PY), dict(ENV))


def _run(
    tmp_path: Path, name: str, argv: list[str], warm: WarmStarts | None
) -> tuple[int, Sink, Workspace, object]:
    ws = _workspace(tmp_path, name)
    runner, sink = ProcessRunner(warm=warm), Sink()
    handle = runner.start(spec("", argv=argv), ws, sink)
    return finish(runner, handle), sink, ws, handle.proc


def _probe(sink: Sink) -> dict[str, object]:
    found: dict[str, object] = json.loads(sink.text()[0])
    return found


def test_a_warm_task_sees_what_a_fresh_interpreter_gives(tmp_path: Path, warm: WarmStarts) -> None:
    """The same command, started cold and warm: the same argv, sys.path, environment, main
    module, umask, session, stdio, signal handlers and exit; only the process differs."""
    argv = ["python3", "probe.py", "7"]
    results = {}
    for name, starts in (("cold", None), ("warm", warm)):
        code, sink, ws, proc = _run(tmp_path, name, argv, starts)
        assert code == 7
        assert sink.text()[1:] == ["thread joined\n", "atexit ran\n"]
        assert (ws.workdir / "unclosed.txt").read_text() == "kept"
        found = _probe(sink)
        results[name] = (found, proc, ws)
    (cold, cold_proc, cold_ws), (hot, hot_proc, hot_ws) = results["cold"], results["warm"]
    assert isinstance(cold_proc, ChildProcess)
    assert isinstance(hot_proc, ForkedProcess)
    server = next(iter(warm._servers.values()))
    assert hot["parent"] == server.proc.pid  # forked by the warm Python, not started afresh
    assert cold["parent"] == os.getpid()
    for probe, ws in ((cold, cold_ws), (hot, hot_ws)):
        probe["cwd"] = os.path.relpath(str(probe["cwd"]), ws.workdir)
        probe["file"] = os.path.relpath(str(probe["file"]), ws.workdir)
        probe["path"] = [os.path.relpath(p, ws.workdir) if p else p for p in probe["path"]]  # type: ignore[attr-defined]
        del probe["parent"]
    assert cold.pop("random") != hot.pop("random")
    assert hot == cold
    assert hot["handlers"]["SIGCHLD"] == str(signal.getsignal(signal.SIGCHLD))  # type: ignore[index]
    assert hot["umask"] == 0o022
    assert hot["leads_session"]
    assert hot["stdin_devnull"]
    assert hot["env"]["GREETING"] == "hello"  # type: ignore[index]
    assert hot["cmdline"] == "python3 probe.py 7"  # not the warm Python's own command line
    assert hot["comm"] == "python3"


@pytest.mark.parametrize(
    ("arg", "code", "stderr"),
    [
        ("0", 0, []),
        ("a message", 1, ["a message\n"]),
        (
            "raise",
            1,
            [
                "Traceback (most recent call last):\n",
                '  File "{workdir}/probe.py", line {line}, in <module>\n',
                '    raise ValueError("the task failed")\n',
                "ValueError: the task failed\n",
            ],
        ),
    ],
)
def test_exit_codes_and_tracebacks_are_the_interpreter_s(
    tmp_path: Path, warm: WarmStarts, arg: str, code: int, stderr: list[str]
) -> None:
    for name, starts in (("cold", None), ("warm", warm)):
        got, sink, ws, _ = _run(tmp_path, name, ["python3", "probe.py", arg], starts)
        assert got == code, name
        line = PROBE.splitlines().index('    raise ValueError("the task failed")') + 1
        expected = [text.format(workdir=ws.workdir, line=line) for text in stderr]
        assert sink.text("stderr") == expected, name


def test_a_missing_script_exits_2_as_python_does(tmp_path: Path, warm: WarmStarts) -> None:
    code, sink, ws, proc = _run(tmp_path, "warm", ["python3", "nothere.py"], warm)
    assert isinstance(proc, ForkedProcess)
    assert code == 2
    [line] = sink.text("stderr")
    assert f"can't open file '{ws.workdir}/nothere.py': [Errno 2] No such file or directory" in line


def test_modules_and_entrypoint_strings_start_warm(tmp_path: Path, warm: WarmStarts) -> None:
    """``python -m MODULE`` (sys.path starts with the working directory) and the master's
    ``sh -c ENTRYPOINT`` in plain words start warm; shell syntax starts cold."""
    ws = _workspace(tmp_path, "module")
    (ws.workdir / "mod.py").write_text(PROBE)
    runner, sink = ProcessRunner(warm=warm), Sink()
    handle = runner.start(spec("", argv=["python3", "-u", "-m", "mod", "5"]), ws, sink)
    assert isinstance(handle.proc, ForkedProcess)
    assert finish(runner, handle) == 5
    found = _probe(sink)
    assert found["name"] == "__main__"
    assert found["argv"] == [str(ws.workdir / "mod.py"), "5"]
    assert found["path"][0] == str(ws.workdir)  # type: ignore[index]
    assert found["cmdline"] == "python3 -u -m mod 5"

    code, sink, _, proc = _run(tmp_path, "shell", ["sh", "-c", "python3 probe.py 4"], warm)
    assert isinstance(proc, ForkedProcess)
    assert code == 4
    assert _probe(sink)["argv"] == ["probe.py", "4"]
    assert _probe(sink)["cmdline"] == "python3 probe.py 4"  # the Python, not sh -c
    for command in ("python3 probe.py > out", "X=1 python3 probe.py", "python3 'probe.py'"):
        assert plan(["sh", "-c", command], ws.workdir, ENV) is None
    code, sink, _, proc = _run(tmp_path, "redirect", ["sh", "-c", "python3 probe.py 3 >&2"], warm)
    assert isinstance(proc, ChildProcess)
    assert code == 3
    assert sink.text() == []
    assert "thread joined\n" in sink.text("stderr")


def test_a_module_in_the_task_directory_named_like_a_preloaded_one_starts_cold(
    tmp_path: Path, warm: WarmStarts
) -> None:
    """A fresh interpreter imports the task's own ``json.py``; the warm one has imported the
    standard library's, so the task starts cold."""
    ws = _workspace(tmp_path, "shadow")
    (ws.workdir / "json.py").write_text("dumps = lambda value: 'the task\\'s own json'\n")
    runner, sink = ProcessRunner(warm=warm), Sink()
    handle = runner.start(spec("", argv=["python3", "probe.py"]), ws, sink)
    assert isinstance(handle.proc, ChildProcess)
    assert finish(runner, handle) == 0
    assert sink.text()[0] == "the task's own json\n"


def test_other_interpreters_and_start_up_variables_get_their_own_server(
    tmp_path: Path, warm: WarmStarts
) -> None:
    """A task whose PYTHONPATH differs from the server's starts cold (and starts a server for
    its own settings); ``python`` and ``python3`` of one environment share a server."""
    servers = dict(warm._servers)
    ws = _workspace(tmp_path, "pythonpath")
    ws.env["PYTHONPATH"] = str(tmp_path)
    runner, sink = ProcessRunner(warm=warm), Sink()
    handle = runner.start(spec("", argv=["python3", "probe.py"]), ws, sink)
    assert isinstance(handle.proc, ChildProcess)
    assert finish(runner, handle) == 0
    assert str(tmp_path) in _probe(sink)["path"]  # type: ignore[operator]
    assert len(warm._servers) == len(servers) + 1
    for key in set(warm._servers) - set(servers):
        warm._servers.pop(key).close()
    code, _, _, proc = _run(tmp_path, "python", [str(Path(PY).parent / "python"), "probe.py"], warm)
    assert isinstance(proc, ForkedProcess)
    assert code == 0
    ws.env["PYTHONPATH"] = "relative/dir"
    assert (
        WarmStarts().spawn(
            ["python3", "probe.py"],
            ws.workdir,
            ws.env,
            umask=0o22,
            outputs=(1, 2),
            stderr_path=ws.stderr_path,
        )
        is None
    )


def test_signals_reach_the_warm_task_s_group(tmp_path: Path, warm: WarmStarts) -> None:
    """SIGTERM and SIGKILL go to the task's whole group; what is left of it dies with it."""
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    ws = _workspace(tmp_path, "signals")
    (ws.workdir / "sleepy.py").write_text(script)
    runner, sink = ProcessRunner(warm=warm), Sink()
    handle = runner.start(spec("", argv=["python3", "sleepy.py"]), ws, sink)
    assert isinstance(handle.proc, ForkedProcess)
    wait_for("the grandchild", lambda: bool(sink.text()))
    grandchild = int(sink.text()[0])
    runner.terminate(handle)
    assert finish(runner, handle) == -signal.SIGTERM
    wait_for("the grandchild to die", lambda: not _alive(grandchild))
    runner.kill(handle)  # after the exit: nothing to signal


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_dead_fork_server_stops_its_tasks_and_is_replaced_later(tmp_path: Path) -> None:
    """Its tasks' exit codes died with it: they are stopped, say why, and exit -SIGKILL; new
    tasks start cold until a minute has passed, then a new server starts."""
    now = [0.0]
    starts = WarmStarts(clock=lambda: now[0])
    starts.prepare(Path(BIN, "python3"), ENV)
    [server] = starts._servers.values()
    wait_for("the warm Python to load", server.ready.is_set, timeout=60)
    ws = _workspace(tmp_path, "lost")
    (ws.workdir / "sleepy.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    runner, sink = ProcessRunner(warm=starts), Sink()
    handle = runner.start(spec("", argv=["python3", "sleepy.py"]), ws, sink)
    wait_for("the task to start", lambda: bool(sink.text()))
    server.proc.kill()
    assert finish(runner, handle) == -signal.SIGKILL
    assert sink.text("stderr") == [SERVER_LOST + "\n"]
    assert not _alive(handle.pid)
    try:
        code, _, _, proc = _run(tmp_path, "cold", ["python3", "probe.py"], starts)
        assert isinstance(proc, ChildProcess)
        assert code == 0
        assert not starts._servers  # no new server within the minute
        now[0] = 61.0
        code, _, _, proc = _run(tmp_path, "again", ["python3", "probe.py"], starts)
        assert isinstance(proc, ChildProcess)
        assert code == 0
        [replacement] = starts._servers.values()
        assert replacement is not server
    finally:
        starts.close()


def test_a_task_forked_after_its_start_gave_up_is_stopped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fork server that answers after the agent stopped waiting (which then reports the start
    failed) must not leave the task running: the agent kills what it forked late."""
    server = ForkServer(Path(BIN, "python3"), ENV, reply_timeout=0.0)
    try:
        wait_for("the warm Python to load", server.ready.is_set, timeout=60)
        ws = _workspace(tmp_path, "late")
        (ws.workdir / "late.py").write_text("import time\ntime.sleep(60)\n")
        launch = plan(["python3", "late.py"], ws.workdir, ENV)
        assert launch is not None
        with (
            caplog.at_level(logging.WARNING, logger="stalwart.agent.warm"),
            ws.stdout_path.open("ab") as out,
            ws.stderr_path.open("ab") as err,
            pytest.raises(OSError, match="did not answer"),
        ):
            server.spawn(
                launch,
                ws.workdir,
                ENV,
                umask=0o022,
                outputs=(out.fileno(), err.fileno()),
                stderr_path=ws.stderr_path,
            )
        wait_for("the late task's answer", lambda: "too late" in caplog.text)
        [pid] = re.findall(r"stopped task process (\d+)", caplog.text)
        wait_for("the late task to be stopped", lambda: not _alive(int(pid)))
        assert not server._replies
    finally:
        server.close()


def test_agents_can_turn_warm_starts_off(tmp_path: Path) -> None:
    from stalwart.agent.loop import _process_runner
    from stalwart.agent.settings import AgentSettings

    settings = {"master_url": "http://127.0.0.1:1", "agent_id": "a", "home": tmp_path}
    on = _process_runner(AgentSettings.model_validate({**settings, "mount_namespaces": "off"}))
    off = _process_runner(
        AgentSettings.model_validate({**settings, "mount_namespaces": "off", "warm_start": False})
    )
    assert on.warm is not None
    assert off.warm is None
