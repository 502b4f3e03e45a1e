"""Each local task's own view of Determined's fixed paths, through a private mount namespace.

The official harness (``import determined as det``) reads ``/run/determined/info/*.json`` and
writes ``shared_fs`` checkpoints under ``/determined_shared_fs``: fixed paths, with no variable
to move them. :class:`~stalwart.agent.runner.ProcessRunner` therefore starts every task through
:mod:`stalwart.agent.nsexec` when the node allows it, which gives the task its own mount
namespace where (see :func:`task_binds`)

- ``/run/determined`` is the task's run directory (``<workspace>/run``, with ``info/``, and
  ``train/model``: the model definition as extracted, which the harness copies into checkpoints
  of legacy Trials; hard links to the workdir's files at start),
- ``/run/determined/workdir`` is its working directory (``<workspace>/workdir``),
- ``/determined_shared_fs`` is the ``host_path`` of its ``shared_fs`` checkpoint storage.

Concurrent tasks never see each other's files, and nothing changes on the host but two empty
mount points (``/run/determined``, ``/determined_shared_fs``), created once.

Whether the node allows it is found once, at agent start (:func:`probe`): root (or
``CAP_SYS_ADMIN``) uses a mount namespace; any other user a user namespace as well, which needs
unprivileged user namespaces and both mount points to exist already (an administrator creates
them once). The agent setting ``mount_namespaces`` chooses: ``auto`` (when the probe passes,
for each task written for the official harness, decided from the task itself by
:func:`uses_official_harness`: the others do not need it and start faster without the wrapper;
when it fails, tasks run as before and the agent's log and the log of each such task say so),
``require`` (every task; the agent refuses to start without it) or ``off`` (never).

Without namespaces (the probe failed, or ``off``), tasks written for the official harness still
run, one at a time per node: :mod:`stalwart.agent.fixedpaths` takes a node-wide lock, links the
fixed paths to the task's own files (:func:`fallback_links`) and execs the task. The links left
behind are turned back into empty directories (:func:`restore_mount_points`) before a namespace
needs the mount points.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stalwart.agent.fixedpaths import LOCK_PATH, Link
from stalwart.agent.identity import TaskIdentity
from stalwart.agent.nsexec import Bind
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.workspace import Workspace
from stalwart.environments.detect import imports_module

__all__ = [
    "FALLBACK_TASK_NOTE",
    "RUN_DIR_TARGET",
    "SHARED_FS_TARGET",
    "FixedPaths",
    "MountNamespaces",
    "config_seen_inside",
    "fallback_links",
    "probe",
    "restore_mount_points",
    "shared_fs_host_path",
    "task_binds",
    "uses_official_harness",
]

RUN_DIR_TARGET = "/run/determined"
SHARED_FS_TARGET = "/determined_shared_fs"
_PROBE_TIMEOUT_S = 10.0

FALLBACK_TASK_NOTE = (
    "NOTE: this agent gives tasks no private mount namespace ({reason}), so tasks written for "
    "the official `determined` harness run one at a time on this node, with /run/determined "
    "and /determined_shared_fs linked to the running task's files. To run them side by side, "
    "run the agent as root or allow unprivileged user namespaces (see docs/cluster.md). "
    "Stalwart's own harness (`import stalwart as det`) is unaffected."
)
"""The line such a task's log gets first; ``{reason}`` is the probe's (or the setting's)."""


@dataclass(frozen=True)
class MountNamespaces:
    """How to start commands in a private mount namespace on this node.

    ``python`` runs :mod:`stalwart.agent.nsexec` (the agent's own interpreter, isolated with
    ``-I`` so the task's ``PYTHON*`` variables cannot affect it); ``user`` adds a user namespace
    (an unprivileged agent).
    """

    python: str = sys.executable
    user: bool = False

    def wrap(
        self,
        argv: Sequence[str],
        binds: Sequence[Bind],
        *,
        check: bool = False,
        identity: TaskIdentity | None = None,
        chdir: str | None = None,
    ) -> list[str]:
        """``argv`` run through nsexec with ``binds`` (the wrapper then execs ``argv``), as
        ``identity`` and in ``chdir`` when given; with ``check``, the command line of nsexec's
        self-check instead (``argv`` is ignored)."""
        out = [self.python, "-I", "-m", "stalwart.agent.nsexec"]
        if self.user:
            out.append("--user")
        if identity is not None:
            out += ["--as", identity.arg]
        if chdir is not None:
            out += ["--chdir", chdir]
        for source, target in binds:
            out += ["--bind", f"{source}:{target}"]
        return [*out, "--check"] if check else [*out, "--", *argv]


@dataclass(frozen=True)
class FixedPaths:
    """How to start commands with the fixed paths linked to their files, one at a time per node
    (:mod:`stalwart.agent.fixedpaths`, run by the agent's own interpreter with ``-I``)."""

    python: str = sys.executable
    lock: str = LOCK_PATH

    def wrap(
        self, argv: Sequence[str], links: Sequence[Link], identity: TaskIdentity | None = None
    ) -> list[str]:
        """``argv`` run through the fixedpaths wrapper with ``links`` (which then execs it, as
        ``identity`` when given)."""
        out = [self.python, "-I", "-m", "stalwart.agent.fixedpaths", "--lock", self.lock]
        if identity is not None:
            out += ["--as", identity.arg]
        for source, target in links:
            out += ["--link", f"{source}:{target}"]
        return [*out, "--", *argv]


def restore_mount_points(lock: str = LOCK_PATH) -> None:
    """Turn links the fallback left on the fixed paths back into empty directories.

    Only while no fallback task holds the lock (a link to a running task's files stays: a
    namespace bind through it still works). Best effort: a path that cannot be changed is left
    for the bind to report.
    """
    if not any(os.path.islink(target) for target in (RUN_DIR_TARGET, SHARED_FS_TARGET)):
        return
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for target in (RUN_DIR_TARGET, SHARED_FS_TARGET):
            if os.path.islink(target):
                with contextlib.suppress(OSError):
                    os.unlink(target)
                    os.mkdir(target)
    except OSError:
        pass  # held by a running fallback task
    finally:
        os.close(fd)


def probe(scratch: Path, python: str = sys.executable) -> MountNamespaces | str:
    """A working :class:`MountNamespaces`, or why there is none (one line).

    Runs ``nsexec --check`` with two directories under ``scratch`` bound on the real mount
    points, so a pass means every task's binds can work (mount points included).
    """
    if not sys.platform.startswith("linux"):
        return f"mount namespaces need Linux, this is {sys.platform}"
    spaces = MountNamespaces(python=python, user=os.geteuid() != 0)
    restore_mount_points()
    scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="nsprobe-", dir=scratch))
    try:
        (work / "run").mkdir()
        (work / "shared").mkdir()
        binds = [(str(work / "run"), RUN_DIR_TARGET), (str(work / "shared"), SHARED_FS_TARGET)]
        argv = spaces.wrap([], binds, check=True)
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the namespace check could not run: {exc}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode == 0:
        return spaces
    lines = (done.stderr or done.stdout).strip().splitlines()
    detail = lines[-1] if lines else f"exit code {done.returncode}"
    who = "as root" if not spaces.user else f"as uid {os.geteuid()} with a user namespace"
    return f"{detail.removeprefix('stalwart nsexec: ')} ({who})"


def _shared_fs(config_json: str) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """``(config, storage, host_path)`` of an experiment config (JSON) whose checkpoint storage
    is ``shared_fs`` with an absolute ``host_path``; None for anything else."""
    try:
        config: Any = json.loads(config_json or "{}")
    except ValueError:
        return None
    storage = config.get("checkpoint_storage") if isinstance(config, dict) else None
    if not isinstance(storage, dict) or storage.get("type") != "shared_fs":
        return None
    host_path = storage.get("host_path")
    if not isinstance(host_path, str) or not os.path.isabs(host_path):
        return None
    return config, storage, host_path


def shared_fs_host_path(spec: TaskSpec) -> str | None:
    """The ``host_path`` of the task's ``shared_fs`` checkpoint storage, if it has one.

    Read from ``DET_EXPERIMENT_CONFIG`` (the fully defaulted config the master hands the task).
    """
    found = _shared_fs(spec.env.get("DET_EXPERIMENT_CONFIG", ""))
    return found[2] if found is not None else None


def task_binds(spec: TaskSpec, workspace: Workspace) -> list[Bind]:
    """The binds of one task (module docstring), creating the directories they need.

    The ``shared_fs`` host path is created when missing (as Docker does for a bind mount).
    Raises OSError when a directory cannot be created.
    """
    restore_mount_points()
    (workspace.run_dir / "workdir").mkdir(exist_ok=True)  # the nested mount point
    _model_copy(workspace.workdir, workspace.run_dir / "train" / "model")
    binds: list[Bind] = [
        (str(workspace.run_dir), RUN_DIR_TARGET),
        (str(workspace.workdir), f"{RUN_DIR_TARGET}/workdir"),
    ]
    host_path = _shared_fs_dir(spec)
    if host_path is not None:
        binds.append((host_path, SHARED_FS_TARGET))
    return binds


def fallback_links(spec: TaskSpec, workspace: Workspace) -> list[Link]:
    """The links of one task run without a namespace: the same views as :func:`task_binds`,
    with ``run/workdir`` a link to the workdir instead of a mount point.

    Raises OSError when a directory or link cannot be created.
    """
    workdir_link = workspace.run_dir / "workdir"
    if not os.path.lexists(workdir_link):
        workdir_link.symlink_to(workspace.workdir.resolve(), target_is_directory=True)
    _model_copy(workspace.workdir, workspace.run_dir / "train" / "model")
    links: list[Link] = [(str(workspace.run_dir.resolve()), RUN_DIR_TARGET)]
    host_path = _shared_fs_dir(spec)
    if host_path is not None:
        links.append((host_path, SHARED_FS_TARGET))
    return links


def _shared_fs_dir(spec: TaskSpec) -> str | None:
    """The task's ``shared_fs`` host path, created when missing (as Docker does for a bind),
    world-writable and sticky (1777, as ``/tmp``) so that tasks run as unprivileged users can
    write their checkpoints; an existing directory is left as its owner made it."""
    host_path = shared_fs_host_path(spec)
    if host_path is not None and not os.path.isdir(host_path):
        Path(host_path).mkdir(parents=True, exist_ok=True)
        os.chmod(host_path, 0o1777)
    return host_path


def config_seen_inside(config_json: str) -> str:
    """``DET_EXPERIMENT_CONFIG`` as a task in a mount namespace must see it when it cannot
    reach the host's paths (it runs as another user): a ``shared_fs`` storage's ``host_path``
    becomes :data:`SHARED_FS_TARGET`, where the namespace mounts it (an absolute
    ``storage_path`` inside it becomes relative). Anything else is returned unchanged."""
    found = _shared_fs(config_json)
    if found is None:
        return config_json
    config, storage, host_path = found
    inside = {**storage, "host_path": SHARED_FS_TARGET}
    sub = storage.get("storage_path")
    if isinstance(sub, str) and os.path.isabs(sub):
        inside["storage_path"] = os.path.relpath(sub, host_path)
    return json.dumps({**config, "checkpoint_storage": inside})


def _model_copy(workdir: Path, model: Path) -> None:
    """``model``: the workdir's tree as hard links (a copy where links fail), made once."""
    if model.exists():
        return
    model.parent.mkdir(parents=True, exist_ok=True)

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    shutil.copytree(workdir, model, symlinks=True, copy_function=link)


def uses_official_harness(argv: Sequence[str], workdir: Path) -> bool:
    """Whether a task is written for Determined's harness: its model definition imports
    ``determined`` (read statically), or its command runs a ``determined`` module (e.g.
    ``python3 -m determined.launch.torch_distributed``)."""
    if _RUNS_DETERMINED.search(" ".join(argv)):
        return True
    return imports_module(workdir, "determined")


_RUNS_DETERMINED = re.compile(r"-m\s+determined(\.|\s|$)")
