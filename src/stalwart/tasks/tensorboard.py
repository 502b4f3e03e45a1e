"""``python -m stalwart.tasks.tensorboard``: the TensorBoard of a TensorBoard task.

Contract:

- ``DET_TENSORBOARD_SOURCES`` is a JSON list of ``{"experiment_id": int, "trial_id": int,
  "storage": {checkpoint_storage config}}`` (:func:`parse_sources`); ``DET_CLUSTER_ID`` (in
  :class:`TaskEnv`) completes the path. A trial's files are in its experiment's checkpoint
  storage under ``<cluster id>/tensorboard/experiment/<e>/trial/<t>/``
  (:mod:`stalwart.storage.tensorboard`), where Stalwart's and Determined's harnesses upload them.
- :class:`Syncer` copies them into a local log directory (a temporary directory removed at the
  end) as ``experiment_<e>/trial_<t>/<path>``, so TensorBoard's run names say which experiment
  and trial a run is (:func:`run_name`). It syncs every ``SYNC_INTERVAL_S`` seconds (every second
  until the first event file arrives): new files appear whole, grown files get their new bytes
  appended, through the storage layer for every storage type. A source whose storage cannot be
  opened or listed is logged and skipped (opening is tried again at the next sync); the others
  are still shown.
- TensorBoard (``sys.executable -m tensorboard.main``) serves ``--logdir`` on
  ``0.0.0.0:$DET_SERVICE_PORT`` under ``--path_prefix /proxy/$DET_TASK_ID``; its output is the
  task's.
- Readiness: :meth:`Reporter.waiting` once while no event file (a name with ``tfevents``) has
  been synced, then :meth:`Reporter.ready` once TensorBoard answers ``data/runs`` with at least
  one run (or, should it list none, ``READY_FALLBACK_S`` seconds after the first event file).
  With no sources, or sources without event files, the task stays waiting (it does not exit).
  Reports go from a thread of their own, so a slow master never stalls syncing.
- The program exits with TensorBoard's status and forwards SIGTERM (and SIGINT, SIGHUP) to it;
  without TensorBoard in this Python, or with a broken contract, it exits 2 with a message.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from stalwart.core.env import TaskEnvError
from stalwart.storage import storage_from_config
from stalwart.storage.tensorboard import TensorboardFiles
from stalwart.tasks._process import Service, exit_code, missing_package, setup_logging
from stalwart.tasks._report import Reporter, service_port

__all__ = [
    "READY_FALLBACK_S",
    "SYNC_INTERVAL_S",
    "Source",
    "Syncer",
    "main",
    "parse_sources",
    "run_name",
    "tensorboard_command",
]

logger = logging.getLogger("stalwart.tasks.tensorboard")

SYNC_INTERVAL_S = 5.0
"""Seconds between syncs once an event file is there."""
READY_FALLBACK_S = 15.0
"""Seconds after the first event file after which TensorBoard counts as ready even if its
``data/runs`` is still empty."""


@dataclass(frozen=True)
class Source:
    """One trial to show."""

    experiment_id: int
    trial_id: int
    storage: Mapping[str, Any]
    """The experiment's ``checkpoint_storage`` config."""


def run_name(source: Source) -> str:
    """The trial's directory in the log directory, which TensorBoard shows as its run name."""
    return f"experiment_{source.experiment_id}/trial_{source.trial_id}"


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def parse_sources(text: str | None) -> list[Source]:
    """``DET_TENSORBOARD_SOURCES`` (see the contract); :class:`TaskEnvError` naming every
    problem."""
    if text is None:
        raise TaskEnvError("DET_TENSORBOARD_SOURCES is not set")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise TaskEnvError(f"DET_TENSORBOARD_SOURCES is not JSON: {exc}") from None
    if not isinstance(value, list):
        raise TaskEnvError("DET_TENSORBOARD_SOURCES is not a JSON list")
    problems: list[str] = []
    sources: list[Source] = []
    for i, item in enumerate(value):
        where = f"DET_TENSORBOARD_SOURCES[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} is not an object")
            continue
        bad = [k for k in ("experiment_id", "trial_id") if not _is_id(item.get(k))]
        problems += [f"{where}.{k} is not a positive integer" for k in bad]
        storage = item.get("storage")
        if not isinstance(storage, dict) or not isinstance(storage.get("type"), str):
            problems.append(f"{where}.storage is not a checkpoint_storage object with a type")
        elif not bad:
            sources.append(Source(item["experiment_id"], item["trial_id"], storage))
    if problems:
        raise TaskEnvError("; ".join(problems))
    return sources


def tensorboard_command(
    logdir: Path, port: int, task_id: str, python: str = sys.executable
) -> list[str]:
    """TensorBoard's command line (Determined's flags; the legacy loader, as Determined)."""
    return [
        python,
        "-m",
        "tensorboard.main",
        f"--logdir={logdir}",
        f"--port={port}",
        "--host=0.0.0.0",
        f"--path_prefix=/proxy/{task_id}",
        "--load_fast=false",
    ]


class Syncer:
    """Copies the sources' files into ``logdir`` (see the module contract)."""

    def __init__(
        self,
        sources: list[Source],
        cluster_id: str,
        logdir: Path,
        *,
        open_files: Callable[[Source, str], TensorboardFiles] | None = None,
    ) -> None:
        self.sources = sources
        self.cluster_id = cluster_id
        self.logdir = logdir
        self._open_files = open_files or self._open
        self._files: dict[int, TensorboardFiles] = {}
        self._complained: set[tuple[int, int, str]] = set()
        self.event_files: set[Path] = set()
        """Local event files synced so far."""

    @staticmethod
    def _open(source: Source, cluster_id: str) -> TensorboardFiles:
        storage = storage_from_config(source.storage)
        return TensorboardFiles(storage, cluster_id, source.experiment_id, source.trial_id)

    def _complain(self, source: Source, what: str, exc: Exception) -> None:
        key = (*_ids(source), f"{what}: {exc}")
        if key not in self._complained:  # once per distinct problem, not every few seconds
            self._complained.add(key)
            logger.error("%s of experiment %d trial %d: %s", what, *_ids(source), exc)

    def sync(self) -> int:
        """One pass over every source; the number of files that changed here."""
        changed = 0
        for i, source in enumerate(self.sources):
            files = self._files.get(i)
            if files is None:
                try:
                    files = self._files[i] = self._open_files(source, self.cluster_id)
                except Exception as exc:
                    self._complain(source, "cannot open the checkpoint storage", exc)
                    continue
            changed += self._sync_source(source, files)
        return changed

    def _sync_source(self, source: Source, files: TensorboardFiles) -> int:
        try:
            listed = files.list_files()
        except Exception as exc:
            self._complain(source, f"cannot list {files.url}", exc)
            return 0
        changed = 0
        for rel, size in listed.items():
            target = self.logdir / run_name(source) / rel
            try:
                written = files.fetch(rel, target, size)
            except Exception as exc:
                self._complain(source, f"cannot download {rel} from {files.url}", exc)
                continue
            if written:
                changed += 1
            if "tfevents" in target.name:
                self.event_files.add(target)
        return changed


def _ids(source: Source) -> tuple[int, int]:
    return source.experiment_id, source.trial_id


class _Announcer(threading.Thread):
    """Tells the master ``waiting`` and ``ready`` in order, off the main loop."""

    def __init__(self, reporter: Reporter) -> None:
        super().__init__(name="stalwart-tensorboard-reports", daemon=True)
        self.reporter = reporter
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def say(self, what: str | None) -> None:
        self._queue.put(what)

    def run(self) -> None:
        while (what := self._queue.get()) is not None:
            try:
                self.reporter.waiting() if what == "waiting" else self.reporter.ready()
                logger.info("told the master: %s", what)
            except Exception as exc:
                logger.error("could not tell the master %r: %s", what, exc)


def _runs(client: httpx.Client, url: str) -> list[Any] | None:
    """TensorBoard's run list, or None while it does not answer."""
    try:
        response = client.get(url)
        response.raise_for_status()
        runs = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    return runs if isinstance(runs, list) else None


def _serve(service: Service, syncer: Syncer, announcer: _Announcer, runs_url: str) -> int:
    """Sync, report and wait until TensorBoard exits; its return code."""
    first_event_at: float | None = None
    ready = waiting = False
    with httpx.Client(timeout=5.0) as client:
        while True:
            syncer.sync()
            if syncer.event_files and first_event_at is None:
                first_event_at = time.monotonic()
            if not ready:
                if first_event_at is None:
                    if not waiting:
                        announcer.say("waiting")
                        waiting = True
                else:
                    runs = _runs(client, runs_url)
                    late = time.monotonic() - first_event_at > READY_FALLBACK_S
                    if runs or (runs is not None and late):
                        announcer.say("ready")
                        ready = True
            code = service.wait(SYNC_INTERVAL_S if ready else 1.0)
            if code is not None:
                return code


def main(environ: Mapping[str, str] | None = None) -> int:
    """Run the TensorBoard task; its exit status (see the module contract)."""
    env = os.environ if environ is None else environ
    setup_logging()
    try:
        reporter = Reporter.from_environ(env)
        port = service_port(env)
        sources = parse_sources(env.get("DET_TENSORBOARD_SOURCES"))
    except TaskEnvError as exc:
        print(f"stalwart tensorboard: {exc}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("tensorboard") is None:
        print(
            f"stalwart tensorboard: {missing_package('TensorBoard', 'tensorboard', 'tensorboard')}",
            file=sys.stderr,
        )
        return 2
    task = reporter.task
    if not sources:
        logger.warning("no trials to show (DET_TENSORBOARD_SOURCES is empty)")
    for source in sources:
        logger.info("showing experiment %d trial %d as %s", *_ids(source), run_name(source))
    logdir = Path(tempfile.mkdtemp(prefix="stalwart-tensorboard-"))
    syncer = Syncer(sources, task.cluster_id, logdir)
    service = Service(tensorboard_command(logdir, port, task.task_id), env=dict(env))
    announcer = _Announcer(reporter)  # threads only after the fork
    announcer.start()
    runs_url = f"http://127.0.0.1:{port}/proxy/{task.task_id}/data/runs"
    try:
        with service.forwarding_signals():
            code = _serve(service, syncer, announcer, runs_url)
    finally:
        code = service.stop()
        announcer.say(None)
        announcer.join(5)
        reporter.close()
        shutil.rmtree(logdir, ignore_errors=True)
    logger.info("TensorBoard exited with status %d", code)
    return exit_code(code)


if __name__ == "__main__":
    sys.exit(main())
