"""The shell task's program (``python -m stalwart.tasks.shell``) with a real sshd and ssh client.

A small recording HTTP server stands in for the master's ready endpoint. The program runs as a
subprocess with the task contract in its environment; ``ssh`` logs in with the key whose public
half was in ``DET_SHELL_AUTHORIZED_KEYS``. Without sshd the tests skip with the install hint,
except under ``CI=true``, where the session fixture runs ``scripts/sshd/install.sh`` and a
missing sshd fails them.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from stalwart.tasks import shell
from stalwart.tasks.shell import (
    SshdFiles,
    authorized_keys_text,
    environment_option,
    find_sshd,
    passwd_problem,
    session_environment,
    sshd_config_text,
)

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "sshd" / "install.sh"
SRC = ROOT / "src"
TIMEOUT = 60.0
TRICKY = "a \"quoted\" \\back\\slash 'single' $HOME `x` ; spaces\tand tab"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


# --- pure helpers ------------------------------------------------------------------------------


def test_session_environment_skips_what_sshd_or_the_client_sets() -> None:
    env = session_environment(
        {
            "DET_TASK_ID": "t1",
            "HOME": "/root",
            "TERM": "xterm",
            "LANG": "C.UTF-8",
            "LC_ALL": "C",
            "_": "/usr/bin/env",
            "USER": "someone",
            "SSH_AUTH_SOCK": "/tmp/agent",
            "BASH_FUNC_ml()": "() { :; }",
            "BASH_FUNC_module%%": "() { :; }",
            "1BAD": "x",
            "ENDS_IN_BACKSLASH": "C:\\",
            "PATH": "/usr/bin:/bin",
        },
        "/venv/bin",
    )
    assert env == {"PATH": "/venv/bin:/usr/bin:/bin", "DET_TASK_ID": "t1"}


def test_session_environment_puts_python_first_once() -> None:
    assert session_environment({"PATH": "/venv/bin:/bin"}, "/venv/bin") == {
        "PATH": "/venv/bin:/bin"
    }
    assert session_environment({"PATH": "/bin:/venv/bin"}, "/venv/bin")["PATH"] == (
        "/venv/bin:/bin:/venv/bin"
    )
    assert session_environment({}, "/venv/bin") == {"PATH": "/venv/bin"}


def test_session_environment_stays_under_sshds_limit() -> None:
    many = {f"V{i:04d}": "x" for i in range(2000)} | {"PATH": "/bin"}
    env = session_environment(many, "/venv/bin")
    assert len(env) == shell.MAX_VARIABLES
    assert env["PATH"] == "/venv/bin:/bin"


def test_environment_option_escapes_quotes_and_newlines() -> None:
    assert environment_option("A", "plain") == 'environment="A=plain"'
    assert environment_option("A", 'say "hi"') == 'environment="A=say \\"hi\\""'
    assert environment_option("A", "one\ntwo\r") == 'environment="A=one\\ntwo\\r"'
    assert environment_option("A", "back\\slash") == 'environment="A=back\\slash"'


def test_authorized_keys_text_prefixes_every_key() -> None:
    keys = (
        'ssh-rsa AAAA one\n\n# a comment\n  ssh-ed25519 BBBB two  \nfrom="10.0.0.0/8" ssh-rsa CC\n'
    )
    text = authorized_keys_text(keys, {"A": "1", "B": "x y"})
    opts = 'environment="A=1",environment="B=x y"'
    assert text.splitlines() == [
        f"{opts} ssh-rsa AAAA one",
        f"{opts} ssh-ed25519 BBBB two",
        f'{opts},from="10.0.0.0/8" ssh-rsa CC',
    ]
    assert authorized_keys_text("ssh-rsa AAAA\n", {}) == "ssh-rsa AAAA\n"


def test_sshd_config_text_says_keys_only() -> None:
    text = sshd_config_text(SshdFiles(Path("/run/t 1%x/sshd")), 4242)
    lines = set(text.splitlines())
    for line in (
        "Port 4242",
        "ListenAddress 0.0.0.0",
        'HostKey "/run/t 1%x/sshd/host_ed25519_key"',
        'AuthorizedKeysFile "/run/t 1%%x/sshd/authorized_keys"',
        'PidFile "/run/t 1%x/sshd/sshd.pid"',
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes",
        "UsePAM no",
        "StrictModes no",
        "PermitRootLogin prohibit-password",
        "PermitUserEnvironment yes",
        "Subsystem sftp internal-sftp",
        "X11Forwarding no",
        "AllowTcpForwarding yes",
    ):
        assert line in lines, line
    with pytest.raises(shell.ShellError):
        sshd_config_text(SshdFiles(Path('/run/"x')), 1)


def test_find_sshd_prefers_path_and_gives_an_absolute_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin" / "sshd"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert find_sshd("bin") == fake
    monkeypatch.setattr(shell, "SSHD_FALLBACK", tmp_path / "missing")
    assert find_sshd("/nonexistent") is None
    monkeypatch.setattr(shell, "SSHD_FALLBACK", fake)
    assert find_sshd("") == fake


def test_passwd_problem_names_accounts_that_cannot_log_in(tmp_path: Path) -> None:
    def entry(home: str, login_shell: str) -> pwd.struct_passwd:
        return pwd.struct_passwd(("u", "x", 1000, 1000, "", home, login_shell))

    assert passwd_problem(entry(str(tmp_path), "/bin/sh")) is None
    assert "nologin" in str(passwd_problem(entry(str(tmp_path), "/usr/sbin/nologin")))
    assert "does not exist" in str(passwd_problem(entry("/nonexistent", "/bin/sh")))
    assert "no passwd entry" in str(passwd_problem(None))


def test_missing_sshd_exits_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name, value in contract_env("http://127.0.0.1:9", 2222, "ssh-rsa AAAA", tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(shell, "SSHD_FALLBACK", tmp_path / "missing")
    assert shell.main() == 1
    err = capsys.readouterr().err
    assert "sshd is not installed" in err
    assert "make sshd" in err


def test_outside_a_task_it_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DET_MASTER", raising=False)
    monkeypatch.delenv("DET_ALLOCATION_ID", raising=False)
    assert shell.main() == 2
    assert "interactive task" in capsys.readouterr().err


# --- a real sshd -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sshd_installed() -> Path:
    """sshd on this machine: installed first under CI=true, else skipped when missing."""
    if in_ci():
        done = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"{INSTALL} failed under CI=true:\n{done.stdout}\n{done.stderr}")
    found = find_sshd(os.environ.get("PATH"))
    missing = [n for n in ("ssh", "ssh-keygen") if shutil.which(n) is None]
    if found is None or missing:
        what = "sshd" if found is None else " and ".join(missing)
        reason = f"{what} is not installed: run `sudo make sshd` (scripts/sshd/install.sh)"
        if in_ci():
            pytest.fail(f"{reason} (required under CI=true)")
        pytest.skip(reason)
    return found


@dataclass
class Master:
    """Records the requests of the program (the master's ready endpoint, answered 200)."""

    url: str
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def master() -> Iterator[Master]:
    record = Master(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            token = self.headers.get("Grpc-Metadata-x-allocation-token", "")
            record.requests.append(("POST", self.path, token))
            if self.path.endswith("/ready"):
                record.ready.set()
            body = b"{}"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    record.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield record
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def keygen(path: Path) -> str:
    """A fresh RSA key pair, as the master makes one per shell; the public line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path.with_suffix(".pub").read_text()


def contract_env(master_url: str, port: int, public_key: str, run_dir: Path) -> dict[str, str]:
    return {
        "DET_MASTER": master_url,
        "DET_CLUSTER_ID": "cluster",
        "DET_AGENT_ID": "agent-1",
        "DET_SLOT_IDS": "[]",
        "DET_TASK_ID": "shell-task-1",
        "DET_ALLOCATION_ID": "shell-task-1.1",
        "DET_SESSION_TOKEN": "alloc-token",
        "DET_TASK_TYPE": "SHELL",
        "DET_SERVICE_PORT": str(port),
        "DET_SHELL_AUTHORIZED_KEYS": public_key,
        "DET_RUN_DIR": str(run_dir),
    }


@dataclass
class Shell:
    """One running shell program."""

    proc: subprocess.Popen[bytes]
    port: int
    key: Path
    user: str
    run_dir: Path
    log: Path

    def ssh(self, command: str, key: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*ssh_argv(key or self.key, self.port, self.user), command],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=TIMEOUT)


def ssh_argv(key: Path, port: int, user: str) -> list[str]:
    return [
        "ssh",
        "-F",
        "/dev/null",
        "-i",
        str(key),
        "-p",
        str(port),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "ConnectTimeout=30",
        f"{user}@127.0.0.1",
    ]


def start_shell(
    master: Master, tmp_path: Path, *, as_nobody: bool = False, extra: dict[str, str] | None = None
) -> Shell:
    key = tmp_path / "id_rsa"
    public = keygen(key)
    # pytest's temporary directories are private to root: nobody's lie in one of their own.
    task_dir = Path(tempfile.mkdtemp(prefix="stalwart-shell-test-")) if as_nobody else tmp_path
    run_dir = task_dir / "run"
    run_dir.mkdir()
    home = task_dir / "home"
    home.mkdir()
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(SRC),
        "HOME": str(home),
        "STALWART_TEST_MARKER": "xyz",
        **contract_env(master.url, port, public, run_dir),
        **(extra or {}),
    }
    argv = [sys.executable, "-m", "stalwart.tasks.shell"]
    user = pwd.getpwuid(os.getuid()).pw_name
    if as_nobody:
        nobody = pwd.getpwnam("nobody")
        for path in (run_dir, home):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
        task_dir.chmod(0o755)
        argv = [
            "setpriv",
            f"--reuid={nobody.pw_uid}",
            f"--regid={nobody.pw_gid}",
            "--clear-groups",
            *argv,
        ]
        user = "nobody"
    log = tmp_path / "program.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    started = Shell(proc, port, key, user, run_dir, log)
    deadline = time.monotonic() + TIMEOUT
    while not master.ready.wait(0.1):
        if proc.poll() is not None or time.monotonic() > deadline:
            started.stop()
            pytest.fail(f"no ready report; the program's log:\n{log.read_text()}")
    return started


@pytest.fixture
def running(sshd_installed: Path, master: Master, tmp_path: Path) -> Iterator[Shell]:
    started = start_shell(master, tmp_path, extra={"TRICKY": TRICKY, "NEWLINE": "a\nb"})
    try:
        yield started
    finally:
        started.stop()


def test_ready_is_reported_once_with_the_allocation_token(running: Shell, master: Master) -> None:
    assert master.requests == [
        ("POST", "/api/v1/allocations/shell-task-1.1/ready", "Bearer alloc-token")
    ]
    log = running.log.read_text()
    assert "Server listening on 0.0.0.0 port" in log  # sshd's own lines reach the task's logs
    files = SshdFiles(running.run_dir / "sshd")
    assert files.authorized_keys.stat().st_mode & 0o777 == 0o600
    assert files.root.stat().st_mode & 0o777 == 0o700


def test_ssh_runs_a_command_with_the_tasks_environment(running: Shell) -> None:
    done = running.ssh("echo ok; echo $STALWART_TEST_MARKER")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["ok", "xyz"]

    # What sshd handed the session's shell, before the user's ~/.bashrc (which may change PATH).
    done = running.ssh("cat /proc/$$/environ; true")  # bash forks cat: $$ is the shell
    assert done.returncode == 0, done.stderr
    env = dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)
    assert env["DET_TASK_ID"] == "shell-task-1"
    assert env["DET_SESSION_TOKEN"] == "alloc-token"
    assert env["PATH"].split(":")[0] == os.path.dirname(sys.executable)  # the task's Python
    assert env["HOME"] == pwd.getpwuid(os.getuid()).pw_dir  # sshd's HOME, not the task's
    assert env["USER"] == running.user
    assert env["TRICKY"] == TRICKY
    assert env["NEWLINE"] == "a\\nb"
    assert "SSH_CONNECTION" in env
    assert "LD_PRELOAD" not in env


def test_a_wrong_key_is_refused(running: Shell, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    keygen(other / "id_rsa")
    done = running.ssh("echo ok", key=other / "id_rsa")
    assert done.returncode == 255
    assert "Permission denied" in done.stderr
    assert "ok" not in done.stdout


def test_sftp_copies_files(running: Shell, tmp_path: Path) -> None:
    source = tmp_path / "hello.txt"
    source.write_text("hello\n")
    target = running.run_dir / "copied.txt"
    ssh = ssh_argv(running.key, running.port, running.user)
    options = ssh[1:-1]  # the same -F/-i/-o options; scp spells the port -P
    options[options.index("-p")] = "-P"
    done = subprocess.run(
        ["scp", "-s", *options, str(source), f"{running.user}@127.0.0.1:{target}"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "hello\n"


def test_sigterm_ends_sshd_and_its_sessions(running: Shell) -> None:
    session = subprocess.Popen(
        [*ssh_argv(running.key, running.port, running.user), "echo started; exec sleep 300"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert session.stdout is not None
    assert session.stdout.readline() == "started\n"
    pid = int((running.run_dir / "sshd" / "sshd.pid").read_text())
    assert running.stop() == 0
    session.communicate(timeout=TIMEOUT)  # the session ends too, long before its sleep
    assert not Path(f"/proc/{pid}").exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", running.port), 5).close()
    assert "Received signal 15; terminating." in running.log.read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="running the program as nobody needs root")
def test_as_nobody_sshd_logs_in_nobody(
    sshd_installed: Path, master: Master, tmp_path: Path
) -> None:
    """An unprivileged task (the agent's default task user, nobody: shell nologin, home
    /nonexistent) logs in its own user, with a shell and the task's HOME (nss_wrapper)."""
    started = start_shell(master, tmp_path, as_nobody=True)
    home = started.run_dir.parent / "home"
    try:
        done = started.ssh('id -un; echo "$HOME"; echo $STALWART_TEST_MARKER; echo $LD_PRELOAD')
        assert done.returncode == 0, f"{done.stderr}\n{started.log.read_text()}"
        assert done.stdout.splitlines() == ["nobody", str(home), "xyz", ""]
        assert started.ssh("id -un").returncode == 0
        refused = subprocess.run(
            [*ssh_argv(started.key, started.port, "root"), "true"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert refused.returncode == 255  # an unprivileged sshd logs in its own user only
        assert "nss_wrapper" in started.log.read_text()
    finally:
        code = started.stop()
        shutil.rmtree(started.run_dir.parent)
    assert code == 0
