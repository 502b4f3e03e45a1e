"""The program a shell task runs: ``python -m stalwart.tasks.shell`` starts an sshd of its own.

``det shell start`` (the official client) logs in with ``ssh -p 0 USER@SHELL_ID`` through the
master's tunnel, which carries the TCP bytes to this sshd on ``DET_SERVICE_PORT`` at the node's
address. USER is the shell's ``agentUserGroup.user`` (``root`` when empty): the OS user this task
runs as.

Contract:

- Reads the task contract (:class:`stalwart.core.env.TaskEnv`), ``DET_SERVICE_PORT`` and
  ``DET_SHELL_AUTHORIZED_KEYS`` (the public key(s) the master handed to the owner, one a line),
  and ``DET_RUN_DIR`` (else a temporary directory) for its files.
- Writes, in ``<run dir>/sshd/`` (mode 0700): a fresh ed25519 host key, ``authorized_keys``
  (0600) where every key carries one ``environment="NAME=VALUE"`` option per variable of the
  task (:func:`session_environment`), so that a session sees the task's environment with the
  task's Python first on ``PATH``; and ``sshd_config`` (:func:`sshd_config_text`).
- Runs ``sshd -D -e -f sshd_config`` by absolute path (``sshd`` on ``PATH``, else
  ``/usr/sbin/sshd``; missing: exits 1 saying how to install it), copies its log lines to its
  own stderr (the task's logs), reports the task ready once at ``Server listening on``, forwards
  SIGTERM and SIGINT (as SIGTERM) to sshd and to its connections, and exits with sshd's status.
- As root, sshd logs in any local account with the key. As any other user it can log in only
  that user; when that user's passwd entry cannot log in (a ``nologin`` shell, as ``nobody``'s,
  a missing home, or no entry at all) sshd runs under nss_wrapper (Debian's ``libnss-wrapper``)
  with an entry of our own: the same name and ids, ``/bin/bash`` (else ``/bin/sh``) and the
  task's ``HOME``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from stalwart.errors import StalwartError
from stalwart.tasks._report import Reporter, service_port

__all__ = [
    "INSTALL_HINT",
    "READY_LINE",
    "SSHD_FALLBACK",
    "ShellError",
    "SshdFiles",
    "authorized_keys_text",
    "environment_option",
    "find_sshd",
    "main",
    "passwd_problem",
    "session_environment",
    "sshd_config_text",
]

SSHD_FALLBACK = Path("/usr/sbin/sshd")
"""Where Debian's openssh-server puts sshd (often not on a task's ``PATH``)."""
READY_LINE = "Server listening on"
"""What sshd logs once it accepts connections."""

INSTALL_HINT = (
    "install Debian's openssh-server on this node (apt-get install openssh-server), or run "
    "`make sshd` (scripts/sshd/install.sh) from a Stalwart checkout"
)

SKIPPED_NAMES = frozenset(
    {"_", "HOME", "TERM", "LANG", "USER", "LOGNAME", "SHELL", "MAIL", "PWD", "OLDPWD", "SHLVL"}
)
"""Variables a session gets from sshd, its client or its shell, not from the task."""
SKIPPED_PREFIXES = ("LC_", "SSH_")
MAX_VARIABLES = 1000
"""sshd refuses a key with more than 1024 ``environment`` options."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
"""sshd refuses a key whose ``environment`` names anything else (``BASH_FUNC_ml()``, ``%%``)."""
_KEY_TYPE = re.compile(r"(ssh-|ecdsa-|sk-)\S+\s")


class ShellError(StalwartError):
    """The shell task cannot start its sshd."""

    code = "shell_task_error"


def session_environment(environ: Mapping[str, str], python_dir: str) -> dict[str, str]:
    """The variables a session gets from the task: all but :data:`SKIPPED_NAMES`,
    ``LC_*`` and ``SSH_*``, names sshd refuses, and values it cannot carry (a trailing
    backslash); ``PATH`` starts with ``python_dir`` (the task's Python)."""
    out: dict[str, str] = {}
    for name, value in sorted(environ.items()):
        if name in SKIPPED_NAMES or name.startswith(SKIPPED_PREFIXES) or not _NAME.match(name):
            continue
        if value.endswith("\\"):
            continue  # sshd would read the closing quote as escaped
        out[name] = value
    path = [p for p in out.pop("PATH", "").split(os.pathsep) if p]
    if python_dir and path[:1] != [python_dir]:
        path.insert(0, python_dir)
    first = {"PATH": os.pathsep.join(path)} if path else {}
    return first | dict(list(out.items())[: MAX_VARIABLES - len(first)])


def environment_option(name: str, value: str) -> str:
    """``environment="NAME=VALUE"`` as sshd reads it from ``authorized_keys``: ``"`` escaped as
    ``\\"`` (sshd's only escape); newlines and carriage returns written as ``\\n`` and ``\\r``
    (a key is one line)."""
    value = value.replace("\n", "\\n").replace("\r", "\\r").replace('"', '\\"')
    return f'environment="{name}={value}"'


def authorized_keys_text(public_keys: str, env: Mapping[str, str]) -> str:
    """``authorized_keys``: each key of ``public_keys`` (blank and ``#`` lines dropped) with
    one ``environment`` option per variable of ``env``, before any options it has."""
    options = ",".join(environment_option(name, value) for name, value in env.items())
    lines = []
    for raw in public_keys.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if options:
            sep = " " if _KEY_TYPE.match(line + " ") else ","
            line = f"{options}{sep}{line}"
        lines.append(line)
    return "".join(f"{line}\n" for line in lines)


@dataclass(frozen=True)
class SshdFiles:
    """The files of one shell's sshd, all under :attr:`root`."""

    root: Path

    @property
    def host_key(self) -> Path:
        return self.root / "host_ed25519_key"

    @property
    def authorized_keys(self) -> Path:
        return self.root / "authorized_keys"

    @property
    def config(self) -> Path:
        return self.root / "sshd_config"

    @property
    def pid_file(self) -> Path:
        return self.root / "sshd.pid"

    @property
    def passwd(self) -> Path:
        return self.root / "passwd"

    @property
    def group(self) -> Path:
        return self.root / "group"


def _quoted(path: Path, *, tokens: bool = False) -> str:
    text = str(path)
    if any(c in text for c in '"\n\r'):
        raise ShellError(f"sshd cannot be given the path {text!r}")
    if tokens:
        text = text.replace("%", "%%")  # AuthorizedKeysFile expands %-tokens
    return f'"{text}"'


def sshd_config_text(files: SshdFiles, port: int) -> str:
    """Our ``sshd_config``: keys only, the task's variables through ``authorized_keys``."""
    return f"""\
# Written by python -m stalwart.tasks.shell for this shell task only.
Port {port}
ListenAddress 0.0.0.0
HostKey {_quoted(files.host_key)}
PidFile {_quoted(files.pid_file)}
AuthorizedKeysFile {_quoted(files.authorized_keys, tokens=True)}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
PermitEmptyPasswords no
PermitRootLogin prohibit-password
UsePAM no
# The run directory may belong to the agent while sshd runs as the task's user.
StrictModes no
# The environment="..." options of authorized_keys carry the task's variables.
PermitUserEnvironment yes
AcceptEnv LANG LC_*
# VS Code's remote extension and scp/sftp need these.
Subsystem sftp internal-sftp
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
PrintLastLog no
UseDNS no
LogLevel INFO
"""


def find_sshd(path: str | None) -> Path | None:
    """The absolute path of ``sshd``: on ``path``, else :data:`SSHD_FALLBACK`; None if neither."""
    found = shutil.which("sshd", path=path or "")
    if found:
        return Path(found).absolute()
    return SSHD_FALLBACK if os.access(SSHD_FALLBACK, os.X_OK) else None


def passwd_problem(entry: pwd.struct_passwd | None) -> str | None:
    """Why sshd cannot log in the account of ``entry`` (None: it can)."""
    if entry is None:
        return "this user has no passwd entry"
    shell = entry.pw_shell or "/bin/sh"
    if os.path.basename(shell) in {"nologin", "false"} or not os.access(shell, os.X_OK):
        return f"its login shell {shell} runs no sessions"
    if not os.path.isdir(entry.pw_dir):
        return f"its home {entry.pw_dir} does not exist"
    return None


def _nss_wrapper() -> str | None:
    for pattern in ("/usr/lib/*/libnss_wrapper.so", "/usr/lib*/libnss_wrapper.so"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def _log(message: str) -> None:
    print(f"stalwart shell: {message}", file=sys.stderr, flush=True)


def _locked(name: str) -> bool:
    """Whether ``/etc/shadow`` locks ``name`` (sshd without PAM refuses it)."""
    try:
        lines = Path("/etc/shadow").read_text().splitlines()
    except OSError:
        return False
    return any(line.startswith(f"{name}:!") for line in lines)


def _prepare(
    files: SshdFiles, environ: Mapping[str, str], keys: str, port: int
) -> tuple[dict[str, str], str]:
    """Write the files; the environment sshd runs with and the user it logs in."""
    files.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(files.root, 0o700)
    for old in (files.host_key, files.host_key.with_suffix(".pub"), files.pid_file):
        old.unlink(missing_ok=True)
    keygen = shutil.which("ssh-keygen", path=environ.get("PATH")) or "/usr/bin/ssh-keygen"
    subprocess.run(
        [keygen, "-q", "-t", "ed25519", "-N", "", "-C", "stalwart-shell", "-f", files.host_key],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    env = session_environment(environ, os.path.dirname(sys.executable))
    fd = os.open(files.authorized_keys, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(authorized_keys_text(keys, env))
    os.chmod(files.authorized_keys, 0o600)
    files.config.write_text(sshd_config_text(files, port))

    sshd_env = dict(environ)
    uid = os.getuid()
    try:
        entry: pwd.struct_passwd | None = pwd.getpwuid(uid)
    except KeyError:
        entry = None
    user = entry.pw_name if entry else environ.get("USER") or "stalwart"
    if uid == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        if _locked(user):
            _log(
                f"/etc/shadow locks {user} (its password starts with '!'): sshd without PAM "
                f"refuses it; unlock it with `usermod -p '*' {user}`"
            )
        return sshd_env, user
    problem = passwd_problem(entry)
    if problem is None:
        return sshd_env, user
    library = _nss_wrapper()
    if library is None:
        _log(
            f"sshd may not log in {user}: {problem}; install Debian's libnss-wrapper (`make "
            "sshd` does) so that this program can give sshd a passwd entry of its own"
        )
        return sshd_env, user
    shell = "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"
    home = environ.get("HOME") or str(files.root)
    if not os.path.isdir(home):
        home = str(files.root)
    gid = os.getgid()
    files.passwd.write_text(f"{user}:x:{uid}:{gid}:{user}:{home}:{shell}\n")
    files.group.write_text(f"{user}:x:{gid}:\n")
    _log(f"{user}: {problem}; sshd logs it in with {shell} and HOME {home} (nss_wrapper)")
    sshd_env.update(
        LD_PRELOAD=library,
        NSS_WRAPPER_PASSWD=str(files.passwd),
        NSS_WRAPPER_GROUP=str(files.group),
    )
    return sshd_env, user


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (sshd's connections)."""
    out = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = Path(stat).read_text()
        except OSError:
            continue
        fields = text.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == str(pid):
            out.append(int(stat.split("/")[2]))
    return out


def _serve(
    sshd: Path, files: SshdFiles, env: Mapping[str, str], reporter: Reporter, user: str
) -> int:
    proc = subprocess.Popen(
        [str(sshd), "-D", "-e", "-f", str(files.config)],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(env),
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        for pid in [*_children(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    stderr: IO[bytes] | None = proc.stderr
    assert stderr is not None
    ready = failed = False
    for raw in stderr:
        line = raw.decode(errors="replace")
        sys.stderr.write(line)
        sys.stderr.flush()
        if not ready and READY_LINE in line:
            ready = True
            try:
                reporter.ready(os_user=user)  # the name `det shell` logs in with
            except StalwartError as exc:
                _log(f"the master did not take the ready report: {exc}")
                failed = True
                stop(signal.SIGTERM, None)
    code = proc.wait()
    if failed:
        return 1
    return code if code >= 0 else 128 - code


def main() -> int:
    """Run the shell task's sshd until it ends (see the module docstring); its exit status."""
    environ = dict(os.environ)
    try:
        reporter = Reporter.from_environ(environ)
        port = service_port(environ)
    except StalwartError as exc:
        _log(str(exc))
        return 2
    keys = environ.get("DET_SHELL_AUTHORIZED_KEYS", "")
    if not keys.strip():
        _log("DET_SHELL_AUTHORIZED_KEYS is empty: the master gives a shell task its owner's key")
        return 2
    sshd = find_sshd(environ.get("PATH"))
    if sshd is None:
        _log(f"sshd is not installed: {INSTALL_HINT}")
        return 1
    run_dir = environ.get("DET_RUN_DIR")
    root = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="stalwart-shell-"))
    files = SshdFiles(root / "sshd")
    try:
        sshd_env, user = _prepare(files, environ, keys, port)
        _log(f"starting {sshd} on port {port}; log in as {user}")
        return _serve(sshd, files, sshd_env, reporter, user)
    except (OSError, subprocess.CalledProcessError, ShellError) as exc:
        _log(f"cannot start sshd: {exc}")
        return 1
    finally:
        reporter.close()


if __name__ == "__main__":
    sys.exit(main())
