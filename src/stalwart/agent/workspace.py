"""One container's directory, files and environment on the agent's host.

Layout: ``<home>/tasks/<allocation_id>/rank-<r>/`` holds

- ``run/`` (``DET_RUN_DIR``, 0700) with ``run/info/<name>`` written from ``TaskSpec.info_files``
  (an empty ``master_url`` in ``cluster.json`` becomes the agent's master URL) and
  ``run/dynamic-tcd-startup-hook.sh`` from ``TaskSpec.startup_hook`` (:mod:`stalwart.agent.hooks`);
  and ``run/reports/`` (``STALWART_REPORTS_SPOOL``), where Stalwart's harness leaves the metrics
  reports it had not delivered when it closed (:func:`read_reports` reads them at the exit);
- ``workdir/`` (``DET_WORKDIR``, the working directory) with the extracted model definition;
- ``stdout.log`` / ``stderr.log``, written by the runner;
- ``started`` (:data:`STARTED_MARK`), written just before the container's process is started.

A directory outlives the agent process: the agent removes it when the master says to forget the
container. What a restarted agent finds there is its earlier life's (:func:`earlier_life`).

:func:`prepare_workspace` starts from an empty directory (a leftover one is removed) and returns
a :class:`Workspace` with the final environment of the task process: the agent's environment
(without the agent's own token) + ``TaskSpec.env`` + what only the node knows (:func:`node_env`)
+ the chosen Python's ``bin`` first on ``PATH``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from stalwart.agent.context import extract_context
from stalwart.agent.hooks import CONFIGURED_HOOK
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.settings import PythonMapping
from stalwart.errors import InvalidArgumentError

__all__ = [
    "REPORTS_DIR",
    "REPORTS_MAX_BYTES",
    "STARTED_MARK",
    "FetchContext",
    "Workspace",
    "choose_python",
    "container_dir",
    "earlier_life",
    "mapped_python",
    "mark_started",
    "master_env",
    "node_env",
    "prepare_workspace",
    "python_executable",
    "read_reports",
    "remove_workspace",
]

FetchContext = Callable[[TaskSpec], bytes]
"""Returns the ``.tar.gz`` model definition of a spec (``b""`` when it has none)."""

# Never handed to tasks: the agent's own credentials.
_PRIVATE_VARS = ("STALWART_AGENT_TOKEN",)


@dataclass(frozen=True)
class Workspace:
    """A prepared container directory and the environment to run the task with."""

    root: Path
    run_dir: Path
    workdir: Path
    python: Path
    env: dict[str, str]

    def with_python(self, python: Path) -> Workspace:
        """The same workspace with another interpreter: its ``bin`` first on ``PATH`` (the
        previous one's stays next, for the commands installed there), ``DET_PYTHON_EXECUTABLE``
        and ``VIRTUAL_ENV`` follow."""
        env = dict(self.env)
        first = str(python.parent)
        rest = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != first]
        env["PATH"] = os.pathsep.join([first, *rest])
        _set_python(env, python)
        return replace(self, python=python, env=env)

    @property
    def stdout_path(self) -> Path:
        return self.root / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.root / "stderr.log"


def _safe_component(value: str, what: str) -> str:
    if not value or value in (".", "..") or "/" in value or "\\" in value or "\0" in value:
        raise InvalidArgumentError(f"unusable {what} {value!r}")
    return value


def container_dir(home: Path, allocation_id: str, rank: int) -> Path:
    """``<home>/tasks/<allocation_id>/rank-<rank>`` (the id must be one path component)."""
    return home / "tasks" / _safe_component(allocation_id, "allocation id") / f"rank-{rank}"


def python_executable(path: Path) -> Path:
    """The interpreter of ``path``: a venv (or prefix) directory's ``bin/python3``, or itself."""
    if path.is_dir():
        for name in ("python3", "python"):
            candidate = path / "bin" / name
            if candidate.exists():
                return candidate
        raise InvalidArgumentError(f"{path} has no bin/python3")
    return path


def choose_python(image: str, mappings: Sequence[PythonMapping], default: Path) -> Path:
    """The first mapping whose pattern matches ``image`` (fnmatch), else ``default``."""
    return mapped_python(image, mappings) or default


def mapped_python(image: str, mappings: Sequence[PythonMapping]) -> Path | None:
    """The Python of the first mapping whose pattern matches ``image`` (fnmatch), or None."""
    for mapping in mappings:
        if fnmatch.fnmatchcase(image, mapping.pattern):
            return python_executable(mapping.path)
    return None


def master_env(master_url: str) -> dict[str, str]:
    """``DET_MASTER`` and its parts, as the node reaches the master."""
    parts = urlsplit(master_url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {
        "DET_MASTER": master_url,
        "DET_MASTER_HOST": host,
        "DET_MASTER_ADDR": host,
        "DET_MASTER_PORT": str(port),
    }


def node_env(*, master_url: str, agent_id: str, run_dir: str, workdir: str) -> dict[str, str]:
    """What the agent adds to ``TaskSpec.env``: the master as this node sees it, the agent id,
    the run and working directories and the reports spool (as the task sees them), unbuffered
    Python."""
    return {
        **master_env(master_url),
        "DET_AGENT_ID": agent_id,
        "DET_RUN_DIR": run_dir,
        "DET_WORKDIR": workdir,
        "STALWART_REPORTS_SPOOL": f"{run_dir.rstrip('/')}/{REPORTS_DIR}",
        "PYTHONUNBUFFERED": "1",
    }


def _device_env(spec: TaskSpec) -> dict[str, str]:
    ids = ",".join(spec.slot_ids)
    if spec.device_type == "cuda":
        return {"CUDA_VISIBLE_DEVICES": ids, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if spec.device_type == "rocm":
        return {"ROCR_VISIBLE_DEVICES": ids}
    return {}


def _process_env(
    base: Mapping[str, str], spec: TaskSpec, python: Path, node: Mapping[str, str]
) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in _PRIVATE_VARS}
    env.update(spec.env)
    env.update(_device_env(spec))
    env.update(node)
    bin_dir = str(python.parent)
    rest = spec.env.get("PATH") or base.get("PATH") or os.defpath
    env["PATH"] = os.pathsep.join([bin_dir, *(p for p in rest.split(os.pathsep) if p != bin_dir)])
    _set_python(env, python)
    return env


def _set_python(env: dict[str, str], python: Path) -> None:
    env["DET_PYTHON_EXECUTABLE"] = str(python)
    if (python.parent.parent / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = str(python.parent.parent)
    else:
        env.pop("VIRTUAL_ENV", None)


def _with_master_url(text: str, master_url: str) -> str:
    """``cluster.json`` with an empty ``master_url`` filled in (the master leaves it to us)."""
    try:
        info = json.loads(text)
    except ValueError:
        return text
    if not isinstance(info, dict) or info.get("master_url"):
        return text
    return json.dumps({**info, "master_url": master_url})


def _write_info(info_dir: Path, files: Mapping[str, str], master_url: str) -> None:
    info_dir.mkdir(mode=0o755)
    info_dir.chmod(0o755)
    for name, text in files.items():
        if name == "cluster.json":
            text = _with_master_url(text, master_url)
        (info_dir / _safe_component(name, "info file name")).write_text(text, encoding="utf-8")


def prepare_workspace(
    spec: TaskSpec,
    *,
    home: Path,
    master_url: str,
    agent_id: str,
    fetch: FetchContext,
    python: Path,
    base_env: Mapping[str, str],
) -> Workspace:
    """Create the container's directory, info files and workdir, and its environment.

    ``fetch`` is called only when ``spec.has_context``. Raises StalwartError subclasses
    (ContextError, InvalidArgumentError) when the container cannot be prepared.
    """
    root = container_dir(home, spec.allocation_id, spec.rank)
    if root.exists():
        shutil.rmtree(root)
    run_dir, workdir = root / "run", root / "workdir"
    root.mkdir(parents=True)
    run_dir.mkdir(mode=0o700)
    (run_dir / REPORTS_DIR).mkdir(mode=0o700)
    _write_info(run_dir / "info", spec.info_files, master_url)
    if spec.startup_hook:
        (run_dir / CONFIGURED_HOOK).write_text(spec.startup_hook, encoding="utf-8")
    workdir.mkdir()
    if spec.has_context:
        extract_context(fetch(spec), workdir)
    node = node_env(
        master_url=master_url,
        agent_id=agent_id,
        run_dir=str(run_dir),
        workdir=str(workdir),
    )
    env = _process_env(base_env, spec, python, node)
    return Workspace(root=root, run_dir=run_dir, workdir=workdir, python=python, env=env)


def remove_workspace(home: Path, allocation_id: str, rank: int) -> None:
    """Delete a container's directory, and its allocation's directory once empty."""
    root = container_dir(home, allocation_id, rank)
    shutil.rmtree(root, ignore_errors=True)
    with contextlib.suppress(OSError):
        root.parent.rmdir()


REPORTS_DIR = "reports"
"""``run/reports/``: the task's metrics reports spool (``STALWART_REPORTS_SPOOL``)."""
REPORTS_MAX_BYTES = 4 << 20
"""The most :func:`take_reports` reads from one spool (the harness writes at most 1 MiB per
closing process)."""


def read_reports(run_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The reports in ``run_dir``'s spool (files ``reports-*.json``, oldest first, each a batch
    post's body); and what could not be read, as lines for the task's log (a file that is not
    such a body; files past ``REPORTS_MAX_BYTES`` in all). Read once, at the exit: the files go
    with the workspace."""
    spool = run_dir / REPORTS_DIR
    try:
        files = sorted(spool.glob("reports-*.json"), key=lambda f: (f.stat().st_mtime_ns, f.name))
    except OSError:
        return [], []
    reports: list[dict[str, Any]] = []
    problems: list[str] = []
    total = 0
    for path in files:
        try:
            size = path.stat().st_size
            if total + size > REPORTS_MAX_BYTES:
                problems.append(
                    f"metrics reports in {path.name} not sent: the spool holds more than "
                    f"{REPORTS_MAX_BYTES} bytes"
                )
                continue
            total += size
            body = json.loads(path.read_bytes())
            items = body.get("reports") if isinstance(body, dict) else None
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise ValueError("not a metrics batch body")
            reports += items
        except (OSError, ValueError) as exc:
            problems.append(f"metrics reports in {path.name} could not be read: {exc}")
    return reports, problems


STARTED_MARK = "started"
"""``<container dir>/started``: the container's process may have run (see :func:`earlier_life`)."""


def mark_started(root: Path) -> None:
    """Record, before the container's process is started, that it may run from now on."""
    (root / STARTED_MARK).touch()


def earlier_life(home: Path) -> list[tuple[str, int]]:
    """The ``(allocation_id, rank)`` of every container an earlier life of this agent started
    and the master never told it to forget, sorted; the directories of those it never started
    are removed (the master sends their start again).

    Call it once, at the agent's start, after the earlier life's processes were killed. Each of
    these must be reported exited: its process ran, and may have reported metrics and
    checkpoints, so running its stored spec again would repeat that run's steps under the same
    run id (the master restarts the trial from its latest checkpoint instead).
    """
    found: list[tuple[str, int]] = []
    for root in sorted((home / "tasks").glob("*/rank-*")):
        rank = root.name.removeprefix("rank-")
        if not root.is_dir() or not rank.isdigit():
            continue
        if (root / STARTED_MARK).exists():
            found.append((root.parent.name, int(rank)))
        else:
            remove_workspace(home, root.parent.name, int(rank))
    return found
