"""The environment a local agent gives tasks written for the official ``determined`` harness.

A Determined user's scripts ``import determined``; Determined's images ship the ``determined``
package, Stalwart's agent runs local processes with its own Python, which does not. So that such
scripts run unchanged on ``stalwart up`` (and on any agent without ``--container-runtime``), the
agent keeps one virtual environment with :data:`REQUIREMENTS` and runs those tasks with its
Python:

- it is built on first need (the first task that imports ``determined`` and that no ``--python``
  mapping sends elsewhere), with ``<agent python> -m venv PATH`` and that venv's
  ``pip install`` (so pip's own configuration applies: ``PIP_INDEX_URL``, ``PIP_FIND_LINKS``...),
  and reused by every later task and every later agent of the same Python environment;
- before pip runs, a ``.pth`` file adds the agent's own ``site-packages`` after the venv's, so
  what the user installed next to Stalwart (torch, their libraries, ``stalwart`` itself) stays
  importable, pip installs only what is missing there, and ``determined``'s pinned dependencies
  win where they differ (the venv is made ``--without-pip``: the agent's pip, found through
  that file, installs into it; ``ensurepip`` only when the agent has no pip);
- ``<PATH>/.stalwart-determined`` (written last) marks a finished build; a directory without it
  is a build that stopped half-way and is built again. A directory the user made (no marker)
  is used as it is when its Python imports ``determined``.

Builds take a file lock (``<PATH>.lock``): concurrent tasks and agents wait for one build. A
build that fails raises :class:`DeterminedEnvError` with what to do; the failure is remembered for
:data:`RETRY_SECONDS`, so the trials of a search fail at once rather than each retrying pip.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from stalwart.errors import StalwartError

__all__ = [
    "DETERMINED_VERSION",
    "MARKER",
    "REQUIREMENTS",
    "DeterminedEnv",
    "DeterminedEnvError",
    "agent_has_determined",
    "default_path",
    "from_option",
]

DETERMINED_VERSION = "0.38.1"
REQUIREMENTS = (f"determined=={DETERMINED_VERSION}", "torch", "tensorboard")
"""The official harness, and what its default ``core.init()`` needs in a trial (a TensorBoard
writer: ``torch.utils.tensorboard``), as Determined's images provide them. pip skips what the
agent's environment already has."""

MARKER = ".stalwart-determined"
RETRY_SECONDS = 60.0
BUILD_TIMEOUT_SECONDS = 3600.0

Say = Callable[[str], None]
"""Receives one line about the build (the agent writes it to the waiting task's log)."""


class DeterminedEnvError(StalwartError):
    """The environment for the official harness could not be built."""

    code = "determined_env"


def default_path() -> Path:
    """Where the environment lives unless the agent is told (``--determined-env``): for an
    agent run by a user, ``$XDG_CACHE_HOME/stalwart`` (``~/.cache/stalwart``); for a root
    agent, whose tasks may run as other users (``task_user``), ``/var/cache/stalwart``, which
    they can reach. One environment per Python environment of the agent: the name is
    ``determined-0.38.1-py<version>-<hash of its prefix>``."""
    digest = hashlib.sha256(sys.prefix.encode()).hexdigest()[:10]
    name = f"determined-{DETERMINED_VERSION}-py{sys.version_info.major}.{sys.version_info.minor}"
    if os.geteuid() == 0:
        return Path("/var/cache/stalwart") / f"{name}-{digest}"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(cache) / "stalwart" / f"{name}-{digest}"


def from_option(value: str | None) -> Path | None:
    """``--determined-env`` / ``STALWART_DETERMINED_ENV``: unset or empty is
    :func:`default_path`, ``off`` is None (no such environment), anything else a path."""
    if not value:
        return default_path()
    if value == "off":
        return None
    return Path(value).expanduser().absolute()


def agent_has_determined() -> bool:
    """Whether the agent's own Python environment already has ``determined`` (then tasks need
    no other environment)."""
    return importlib.util.find_spec("determined") is not None


def _site_dirs() -> list[str]:
    """The agent's ``site-packages`` directories (its venv's, or the interpreter's)."""
    seen: list[str] = []
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths()[key]
        if path not in seen:
            seen.append(path)
    return seen


class DeterminedEnv:
    """The official harness's environment at ``path`` (see the module docstring); thread-safe.

    ``base_python``: the interpreter the venv is made from (default: the agent's).
    """

    def __init__(self, path: Path, *, base_python: Path | None = None) -> None:
        self.path = path.expanduser().absolute()
        self.base_python = base_python or Path(sys.executable)
        self._lock = threading.Lock()
        self._ready: Path | None = None
        self._failed: tuple[float, str] | None = None

    @property
    def python(self) -> Path:
        """The environment's interpreter (whether or not it exists yet)."""
        return self.path / "bin" / "python3"

    def ready(self) -> Path | None:
        """The interpreter when the environment is usable now (no build), else None."""
        if self._ready is not None:
            return self._ready
        if (self.path / MARKER).is_file() and self.python.exists():
            self._ready = self.python
        return self._ready

    def ensure(self, say: Say) -> Path:
        """The interpreter, after building the environment if need be (blocking, minutes at
        most; any thread). Raises DeterminedEnvError saying what to do when it cannot."""
        with self._lock:
            found = self.ready()
            if found is not None:
                return found
            if self._failed is not None and time.monotonic() - self._failed[0] < RETRY_SECONDS:
                raise DeterminedEnvError(self._failed[1])
            try:
                _make_dirs(self.path.parent)
                with open(f"{self.path}.lock", "w") as lock:
                    if not _try_lock(lock):
                        say(f"waiting for another build of {self.path} to finish")
                        fcntl.flock(lock, fcntl.LOCK_EX)
                    found = self.ready() or self._users_own(say) or self._build(say)
            except DeterminedEnvError as exc:
                self._failed = (time.monotonic(), str(exc))
                raise
            except OSError as exc:
                message = self._advice(f"cannot build {self.path}: {exc}")
                self._failed = (time.monotonic(), message)
                raise DeterminedEnvError(message) from exc
            self._failed = None
            self._ready = found
            return found

    def _users_own(self, say: Say) -> Path | None:
        """An existing environment without our marker that imports ``determined``: the user's
        own (used as it is). A half-built one of ours is removed (None)."""
        if not self.path.exists():
            return None
        if self.path.is_dir() and not any(self.path.iterdir()):
            self.path.rmdir()
            return None
        if (self.path / ".stalwart-building").exists():
            shutil.rmtree(self.path)
            return None
        python = self.python if self.python.exists() else self.path / "bin" / "python"
        if python.exists() and _imports_determined(python):
            return python
        raise DeterminedEnvError(
            f"{self.path} exists but its Python cannot `import determined`; install "
            f"{' '.join(REQUIREMENTS)} there, or delete it and Stalwart builds it again"
        )

    def _build(self, say: Say) -> Path:
        say(
            f"preparing the official Determined harness for tasks that import determined "
            f"(once): {' '.join(REQUIREMENTS)} into {self.path}"
        )
        started = time.monotonic()
        _make_dirs(self.path)
        (self.path / ".stalwart-building").touch()
        venv = [str(self.base_python), "-m", "venv", "--without-pip", str(self.path)]
        if _is_copy(self.base_python):  # the interpreter a copy like the agent's own, which
            venv.insert(-1, "--copies")  # task users can run where they can run that one
        self._run(venv, say, "python -m venv")
        purelib = _venv_purelib(self.python)
        lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in _site_dirs())
        pth = purelib / "zz-stalwart-agent-site.pth"
        pth.write_text(lines, encoding="utf-8")
        pth.chmod(0o644)
        if importlib.util.find_spec("pip") is None:  # else the agent's pip serves the venv
            self._run([str(self.python), "-m", "ensurepip"], say, "python -m ensurepip")
        self._run(
            [
                str(self.python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                *REQUIREMENTS,
            ],
            say,
            "pip install",
        )
        (self.path / ".stalwart-building").unlink()
        (self.path / MARKER).write_text(" ".join(REQUIREMENTS) + "\n", encoding="utf-8")
        say(f"prepared {self.path} in {time.monotonic() - started:.0f}s; later tasks reuse it")
        return self.python

    def _run(self, argv: list[str], say: Say, what: str) -> None:
        tail: deque[str] = deque(maxlen=15)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PIP_NO_INPUT": "1"},
                umask=0o022,  # tasks may run as other users (the agent's own umask is 0077)
            )
        except OSError as exc:
            raise DeterminedEnvError(self._advice(f"cannot run {what}: {exc}")) from exc
        with proc:
            assert proc.stdout is not None
            deadline = time.monotonic() + BUILD_TIMEOUT_SECONDS
            for line in proc.stdout:
                tail.append(line.rstrip())
                say(line.rstrip())
                if time.monotonic() > deadline:
                    proc.kill()
                    tail.append(f"(stopped after {BUILD_TIMEOUT_SECONDS:.0f}s)")
                    break
            code = proc.wait()
        if code != 0:
            details = "\n".join(tail)
            raise DeterminedEnvError(self._advice(f"{what} exited with code {code}:\n{details}"))

    def _advice(self, problem: str) -> str:
        return (
            f"tasks that import determined need the official harness, and Stalwart could not "
            f"prepare it: {problem}\n"
            f"To fix: make PyPI (or your package index: PIP_INDEX_URL / PIP_FIND_LINKS) reachable "
            f"for the agent and run the experiment again; or build it yourself: "
            f"`{self.base_python} -m venv {self.path} && {self.path}/bin/pip install "
            f"{' '.join(REQUIREMENTS)}`; or point the agent at an environment that has "
            f"determined: `STALWART_DETERMINED_ENV=/path/to/venv stalwart up` (agents: "
            f"`--determined-env PATH`)."
        )


def _is_copy(python: Path) -> bool:
    """Whether ``python`` is a virtual environment's own copy of its interpreter (``venv
    --copies``) rather than a link to the base one."""
    real = Path(os.path.realpath(python))
    prefix = Path(os.path.realpath(python.parent.parent))
    return (prefix / "pyvenv.cfg").is_file() and real.parent == prefix / "bin"


def _make_dirs(path: Path) -> None:
    """``mkdir -p`` whose new directories every task user can enter (0755)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)


def _try_lock(lock: TextIO) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _venv_purelib(python: Path) -> Path:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise DeterminedEnvError(f"{python} does not run: {done.stderr.strip()}")
    return Path(done.stdout.strip())


def _imports_determined(python: Path) -> bool:
    done = subprocess.run(
        [str(python), "-c", "import determined"],
        capture_output=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    return done.returncode == 0
