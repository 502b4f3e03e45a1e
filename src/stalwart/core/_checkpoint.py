"""``CheckpointContext``: save checkpoints to storage and report them to the master.

Contract:

- A checkpoint is a directory named by a new UUID (its *storage id*) in the trial's checkpoint
  storage, with the user's ``metadata.json`` beside the user's files.
- ``metadata`` must hold ``steps_completed`` (:class:`ValueError` otherwise, checked before
  anything is written) and be JSON (:class:`TypeError` otherwise).
- Storage that is a local directory (``shared_fs``, ``directory``) is written and read in place.
  Object stores (``s3``, ``gcs``, ``azure``) go through a temporary local directory:
  ``store_path`` yields an empty one and uploads it when the block ends; ``restore_path``
  downloads into one and removes it when the block ends. Transfers are logged with their
  progress.
- ``store_path`` and ``upload`` report the checkpoint only once every file is stored: ``POST
  /api/v1/checkpoints`` (wire doc 5.5) with every file and directory stored as ``resources``
  (sizes as strings, ``metadata.json`` included). A failed upload removes what it stored and
  reports nothing, so a partial checkpoint is never registered. The report is idempotent on the
  UUID, so a retry after a master restart is safe. Before it, the metrics reported earlier are
  flushed (``before_report``), so an accepted checkpoint never stands ahead of them. If the
  ``store_path`` block raises, its
  directory is removed and nothing is uploaded or reported.
- A storage failure of an unsharded ``store_path`` or ``upload`` (an ``OSError`` such as a full
  disk, ``ENOSPC``, or a :class:`~stalwart.storage.StorageError`, in the block or after it)
  fails the checkpoint: what was stored of it is removed, the trial's log gets an error line
  naming the checkpoint, the storage and what to do, the master is told the checkpoint is
  ``STATE_ERROR`` (no files; best effort, it never moves the trial's latest checkpoint), and the
  exception goes on to the caller.
- Without ``shard``, only the chief (rank 0) saves (:class:`RuntimeError` elsewhere).
- With ``shard=True`` (Determined's sharded checkpoints) ``store_path``/``upload`` are collective:
  every rank calls them, in step. The chief picks the storage id and every rank gets it. Each
  rank writes its own files (``store_path``: into a directory of its own, beside the checkpoint
  for local storage, so that no rank overwrites another's; ``upload``: its ``ckpt_dir``, or
  ``None`` for nothing, where ranks of one node that pass the same directory upload it once). The
  file lists go round; a file that two ranks wrote (or a file where another rank has a
  directory) fails every rank with a :class:`RuntimeError` naming the files and ranks, before
  anything is stored. The ranks' metadata are merged (nested dicts merge key by key; a key whose
  values differ fails every rank with a :class:`RuntimeError` before the block runs;
  ``steps_completed`` may come from any rank). A rank's own ``metadata.json`` is not stored: the
  chief writes the merged one after every rank's files are stored, then reports one checkpoint
  with every rank's files. A failure on any rank (its block raising, its transfer failing)
  fails every rank; what was stored is removed and nothing is reported. Every rank returns once
  the report is done.
- Restoring is allowed on every rank. In a run with several workers per node, the default
  :attr:`DownloadMode.LocalWorkersShareDownload` is collective among a node's workers: the node's
  first worker downloads once (the union of the files the workers' selectors keep) and they all
  read it (``download``: only when they all pass the same directory; otherwise each downloads
  its own). ``NoSharedDownload`` has each rank download on its own, without collectives.
  Local storage is read in place (no collectives).
- :class:`LocalCheckpointContext` is the off-cluster twin: the same files, no master; metadata is
  read back from ``metadata.json``. ``shard=True`` works there too (usually one rank).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import errno
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from stalwart.core._client import Session
from stalwart.core._distributed import DistributedContext
from stalwart.core._json import jsonable
from stalwart.storage import (
    CheckpointNotFoundError,
    LocalPaths,
    Progress,
    Selector,
    StorageBackend,
    StorageError,
    list_local_resources,
)
from stalwart.storage.fs import select

__all__ = ["CheckpointContext", "DownloadMode", "LocalCheckpointContext"]

logger = logging.getLogger("stalwart.core")

METADATA_FILE = "metadata.json"
PROGRESS_LOG_INTERVAL_S = 10.0
"""How often a long transfer logs its progress."""


class DownloadMode(enum.Enum):
    """Whether the workers of a node share one download (all must call in step) or not."""

    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"


def _json_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    value = jsonable(metadata or {}, "metadata")
    if not isinstance(value, dict):
        raise TypeError(f"checkpoint metadata must be a dict, got {type(metadata).__name__}")
    return value


def _require_steps(value: dict[str, Any]) -> dict[str, Any]:
    if "steps_completed" not in value:
        raise ValueError(
            "metadata for reported checkpoints requires a 'steps_completed' item, which has "
            "not been provided"
        )
    return value


def _checked_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    return _require_steps(_json_metadata(metadata))


def merge_metadata(
    all_metadata: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """The ranks' metadata (in rank order) as one dict, and its conflicts: key path (``a/b``)
    -> the ranks that gave the key. Dicts under the same key merge key by key; any other value
    given by several ranks must be equal (Determined's rule)."""
    merged: dict[str, Any] = {}
    givers: dict[str, list[int]] = {}
    conflicted: set[str] = set()

    def merge(into: dict[str, Any], value: Mapping[str, Any], rank: int, prefix: str) -> None:
        for key, item in value.items():
            path = f"{prefix}{key}"
            givers.setdefault(path, []).append(rank)
            if isinstance(item, dict) and isinstance(into.get(key, {}), dict):
                merge(into.setdefault(key, {}), item, rank, f"{path}/")
            elif key not in into:
                into[key] = item
            elif into[key] != item:
                conflicted.add(path)

    for rank, metadata in enumerate(all_metadata):
        merge(merged, metadata, rank, "")
    return merged, {path: givers[path] for path in sorted(conflicted)}


def merge_resources(
    all_resources: Sequence[Mapping[str, int]],
) -> tuple[dict[str, int], dict[str, list[int]]]:
    """The ranks' resources (in rank order) as one sorted map, and its conflicts: each file that
    more than one rank has (as a file, or where another rank has a directory of that name) ->
    those ranks. Directories may be shared."""
    merged: dict[str, int] = {}
    holders: dict[str, list[int]] = {}
    files: set[str] = set()
    for rank, resources in enumerate(all_resources):
        for name, size in resources.items():
            merged[name] = size
            bare = name.rstrip("/")
            ranks = holders.setdefault(bare, [])
            if rank not in ranks:
                ranks.append(rank)
            if not name.endswith("/"):
                files.add(bare)
    conflicts = {name: holders[name] for name in sorted(files) if len(holders[name]) > 1}
    return dict(sorted(merged.items())), conflicts


def _with_parents(files: Mapping[str, int]) -> dict[str, int]:
    out = dict(files)
    for rel in files:
        parent = PurePosixPath(rel.rstrip("/")).parent
        while str(parent) != ".":
            out.setdefault(f"{parent}/", 0)
            parent = parent.parent
    return dict(sorted(out.items()))


def _shard_of(src: Path, selector: Selector | None) -> tuple[dict[str, int], Selector | None]:
    """What one rank contributes from ``src``: its resources (those ``selector`` keeps, less a
    top-level ``metadata.json``: the chief writes the merged one), and the selector that
    transfers exactly those."""
    keep = selector
    if (src / METADATA_FILE).exists():

        def keep(rel: str) -> bool:
            return rel != METADATA_FILE and (selector is None or selector(rel))

    resources = list_local_resources(src)
    return (resources, None) if keep is None else (_with_parents(select(resources, keep)), keep)


_Problem = tuple[str, str] | None
"""How a rank tells the others that it failed: the exception's class name and message."""

_SAME_CLASS: dict[str, type[Exception]] = {
    "TypeError": TypeError,
    "ValueError": ValueError,
    "FileNotFoundError": FileNotFoundError,
    "CheckpointNotFoundError": CheckpointNotFoundError,
}
"""Failures the other ranks raise as the same class (anything else: RuntimeError)."""


def _problem(exc: BaseException | None) -> _Problem:
    return None if exc is None else (type(exc).__name__, str(exc))


def _fail_if_any(problems: Sequence[_Problem], mine: BaseException | None, what: str) -> None:
    """Raise on every rank when any rank failed: a rank that failed raises its own exception;
    the others raise one naming the ranks that failed."""
    if mine is not None:
        raise mine
    failed = [(rank, p) for rank, p in enumerate(problems) if p is not None]
    if not failed:
        return
    detail = "; ".join(f"rank {rank}: {kind}: {message}" for rank, (kind, message) in failed)
    raise _SAME_CLASS.get(failed[0][1][0], RuntimeError)(f"{what}: {detail}")


def _conflict_error(storage_id: str, what: str, conflicts: Mapping[str, list[int]]) -> RuntimeError:
    lines = "".join(
        f"\n    {name}: ranks {', '.join(map(str, ranks))}" for name, ranks in conflicts.items()
    )
    return RuntimeError(f"refusing to store sharded checkpoint {storage_id}: {what}:{lines}")


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception in its cause chain says the storage is full."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _failure_line(storage_id: str, storage: StorageBackend, exc: BaseException) -> str:
    """The trial-log line of a failed checkpoint: which, where, why, what to do."""
    if _disk_full(exc):
        advice = (
            "the checkpoint storage is full: free space there, point checkpoint_storage at a "
            "larger one, or keep fewer checkpoints (save_trial_latest, save_experiment_best)"
        )
    else:
        advice = "check that the checkpoint storage is reachable and writable"
    return (
        f"checkpoint {storage_id} FAILED, nothing of it was kept ({storage}): "
        f"{type(exc).__name__}: {exc}; {advice}"
    )


def _write_metadata(path: Path, metadata: dict[str, Any]) -> None:
    (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2), encoding="utf-8")


@contextlib.contextmanager
def _staging(what: str, storage_id: str) -> Iterator[Path]:
    """A temporary local directory for one checkpoint transfer, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=f"stalwart-{what}-{storage_id[:8]}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class _ProgressLog:
    """Logs a transfer's progress at most every ``PROGRESS_LOG_INTERVAL_S`` and once at the
    end."""

    def __init__(self, verb: str, storage_id: str, storage: StorageBackend) -> None:
        self._verb = verb
        self._storage_id = storage_id
        self._storage = storage
        self._started = time.monotonic()
        self._next = self._started + PROGRESS_LOG_INTERVAL_S

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + PROGRESS_LOG_INTERVAL_S
        logger.info(
            "%s checkpoint %s: %.0f%% (%.1f of %.1f MB, %d of %d files)",
            self._verb,
            self._storage_id,
            progress.fraction * 100,
            progress.bytes_done / 1e6,
            progress.bytes_total / 1e6,
            progress.files_done,
            progress.files_total,
        )

    def done(self, resources: Mapping[str, int]) -> None:
        size = sum(resources.values())
        logger.info(
            "%s checkpoint %s (%s): %.1f MB in %.1f s",
            self._verb.replace("ing", "ed"),
            self._storage_id,
            self._storage,
            size / 1e6,
            time.monotonic() - self._started,
        )


class _Checkpoints:
    """Storage operations shared by both twins; subclasses say how a checkpoint is reported."""

    def __init__(self, dist: DistributedContext, storage: StorageBackend) -> None:
        self._dist = dist
        self._storage = storage

    @property
    def storage(self) -> StorageBackend:
        """Where checkpoints go."""
        return self._storage

    def _report(self, storage_id: str, resources: dict[str, int], metadata: dict[str, Any]) -> None:
        raise NotImplementedError

    def _deleted(self, storage_id: str, resources: dict[str, int]) -> None:
        raise NotImplementedError

    def _report_failed(self, storage_id: str, metadata: dict[str, Any]) -> None:
        """Tell whoever keeps the checkpoint list that ``storage_id`` failed (best effort)."""

    @contextlib.contextmanager
    def _failing(self, storage_id: str, metadata: dict[str, Any]) -> Iterator[None]:
        """A storage failure inside fails the checkpoint (module contract) and goes on."""
        try:
            yield
        except (OSError, StorageError) as exc:
            self._remove_quietly(storage_id)
            logger.error(_failure_line(storage_id, self._storage, exc))
            self._report_failed(storage_id, metadata)
            raise

    def _chief_only(self, what: str) -> None:
        if self._dist.rank != 0:
            raise RuntimeError(
                f"cannot call CheckpointContext.{what}() from non-chief worker "
                f"(rank={self._dist.rank})"
            )

    def _upload(self, src: Path, storage_id: str, selector: Selector | None) -> dict[str, int]:
        log = _ProgressLog("uploading", storage_id, self._storage)
        resources = self._storage.upload(src, storage_id, selector=selector, progress=log)
        log.done(resources)
        return resources

    def _download(self, storage_id: str, dst: Path, selector: Selector | None) -> None:
        log = _ProgressLog("downloading", storage_id, self._storage)
        log.done(self._storage.download(storage_id, dst, selector=selector, progress=log))

    @contextlib.contextmanager
    def store_path(
        self, metadata: Mapping[str, Any] | None = None, *, shard: bool = False
    ) -> Iterator[tuple[Path, str]]:
        """A new checkpoint directory to save into: ``with ... as (path, storage_id):``; the
        checkpoint is stored and reported when the block ends. With ``shard=True`` every rank
        calls it and gets a directory of its own in the same checkpoint (module contract)."""
        if shard:
            with self._store_sharded(metadata) as got:
                yield got
            return
        checked = _checked_metadata(metadata)
        self._chief_only("store_path")
        storage_id = str(uuid.uuid4())
        with self._failing(storage_id, checked):
            if isinstance(self._storage, LocalPaths):
                with self._storage.store_path(storage_id) as path:
                    yield path, storage_id
                    _write_metadata(path, checked)
                    resources = list_local_resources(path)
            else:
                with _staging("store", storage_id) as path:
                    yield path, storage_id
                    _write_metadata(path, checked)
                    resources = self._upload(path, storage_id, None)
        self._report(storage_id, resources, checked)

    @contextlib.contextmanager
    def restore_path(
        self,
        storage_id: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> Iterator[Path]:
        """The checkpoint as a local directory for the duration of the block: in place for
        local storage (``selector`` is ignored there), else a temporary download of the files
        ``selector`` keeps (shared by a node's workers in ``LocalWorkersShareDownload`` mode:
        the union of what their selectors keep)."""
        mode = DownloadMode(download_mode)
        if isinstance(self._storage, LocalPaths):
            yield self._storage.restore_path(storage_id)
            return
        if mode is DownloadMode.LocalWorkersShareDownload and self._dist.local_size > 1:
            with self._node_download(storage_id, None, selector) as path:
                yield path
            return
        with _staging("restore", storage_id) as path:
            self._download(storage_id, path, selector)
            yield path

    def upload(
        self,
        ckpt_dir: str | os.PathLike[str] | None,
        metadata: Mapping[str, Any] | None = None,
        *,
        shard: bool = False,
        selector: Selector | None = None,
    ) -> str:
        """Store the files of ``ckpt_dir`` (those ``selector`` keeps) as a new checkpoint and
        report it; its storage id. ``ckpt_dir`` itself is not changed. With ``shard=True`` every
        rank calls it (``ckpt_dir=None`` where a rank has nothing) and the checkpoint holds the
        files of all of them (module contract)."""
        if shard:
            return self._upload_sharded(ckpt_dir, metadata, selector)
        checked = _checked_metadata(metadata)
        self._chief_only("upload")
        if ckpt_dir is None:
            raise RuntimeError(
                "cannot call CheckpointContext.upload(ckpt_dir=None, shard=False), which would "
                "store nothing"
            )
        src = Path(ckpt_dir)
        if not src.is_dir():
            raise FileNotFoundError(f"checkpoint directory {src} does not exist")
        storage_id = str(uuid.uuid4())
        with self._failing(storage_id, checked):
            resources = self._upload(src, storage_id, selector)
            resources |= self._upload_metadata(storage_id, checked)
        self._report(storage_id, dict(sorted(resources.items())), checked)
        return storage_id

    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike[str],
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> None:
        """Copy the checkpoint's files (those ``selector`` keeps) into ``ckpt_dir`` (created if
        needed). In ``LocalWorkersShareDownload`` mode a node's workers that pass the same
        directory download once (the union of what their selectors keep)."""
        mode = DownloadMode(download_mode)
        dst = Path(ckpt_dir)
        if mode is DownloadMode.LocalWorkersShareDownload and self._dist.local_size > 1:
            targets = self._dist.allgather_local(str(dst.absolute()))
            if len(set(targets)) == 1:
                with self._node_download(storage_id, dst, selector):
                    return
        self._download(storage_id, dst, selector)

    # -- sharded checkpoints (every rank calls these in step) ---------------------------------

    def _shard_begin(self, metadata: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """The chief's new storage id and the ranks' merged metadata (or the same error on every
        rank), before anything is written."""
        mine: Exception | None = None
        value: dict[str, Any] = {}
        try:
            value = _json_metadata(metadata)
        except (TypeError, ValueError) as exc:
            mine = exc
        proposed = str(uuid.uuid4()) if self._dist.rank == 0 else None
        everyone = self._dist.allgather((proposed, value, _problem(mine)))
        storage_id: str = everyone[0][0]
        _fail_if_any([e[2] for e in everyone], mine, "invalid checkpoint metadata")
        merged, conflicts = merge_metadata([e[1] for e in everyone])
        if conflicts:
            raise _conflict_error(
                storage_id,
                "these metadata keys have different values on different ranks",
                conflicts,
            )
        return storage_id, _require_steps(merged)

    def _shard_check(
        self,
        storage_id: str,
        mine: BaseException | None,
        resources: dict[str, int],
        source: Any,
    ) -> bool:
        """Share every rank's files and check them; whether this rank stores its own. Ranks with
        the same ``source`` (not None) store it once (the lowest does); a None ``source`` has
        nothing."""
        everyone = self._dist.allgather((_problem(mine), source, resources))
        _fail_if_any([e[0] for e in everyone], mine, f"sharded checkpoint {storage_id} not stored")
        sources = [e[1] for e in everyone]
        if all(s is None for s in sources):
            raise RuntimeError(
                "cannot call CheckpointContext.upload(ckpt_dir=None, shard=True) from every "
                "rank; at least one rank must have a checkpoint directory"
            )
        owners = [s is not None and sources.index(s) == r for r, s in enumerate(sources)]
        shards = [e[2] if owner else {} for e, owner in zip(everyone, owners, strict=True)]
        _, conflicts = merge_resources(shards)
        if conflicts:
            raise _conflict_error(
                storage_id, "these files were written by more than one rank", conflicts
            )
        return owners[self._dist.rank]

    def _shard_store(
        self,
        storage_id: str,
        metadata: dict[str, Any],
        src: Path | None,
        resources: dict[str, int],
        selector: Selector | None,
        *,
        move: bool,
    ) -> None:
        """Store this rank's files (``src``: those of ``resources``; ``move``: by renaming them
        into the local checkpoint, else by uploading copies), then have the chief store the
        merged metadata and report the checkpoint. Any failure fails every rank; a failed store
        is removed."""
        mine: Exception | None = None
        stored: dict[str, int] = {}
        try:
            if src is not None and resources:
                stored = self._put_shard(src, storage_id, resources, selector, move=move)
        except Exception as exc:
            mine = exc
        everyone = self._dist.allgather((_problem(mine), stored))
        problems = [e[0] for e in everyone]
        if any(p is not None for p in problems):
            if self._dist.rank == 0:
                self._remove_quietly(storage_id)
            _fail_if_any(problems, mine, f"sharded checkpoint {storage_id} not stored")
        mine = None
        if self._dist.rank == 0:
            all_stored, _ = merge_resources([e[1] for e in everyone])
            try:
                try:
                    all_stored |= self._put_metadata(storage_id, metadata)
                except Exception:
                    self._remove_quietly(storage_id)
                    raise
                self._report(storage_id, dict(sorted(all_stored.items())), metadata)
            except Exception as exc:
                mine = exc
        chief = self._dist.broadcast(_problem(mine))
        _fail_if_any([chief], mine, f"sharded checkpoint {storage_id} not stored (the chief)")

    def _put_shard(
        self,
        src: Path,
        storage_id: str,
        resources: dict[str, int],
        selector: Selector | None,
        *,
        move: bool,
    ) -> dict[str, int]:
        if not move or not isinstance(self._storage, LocalPaths):
            return self._upload(src, storage_id, selector)
        final = self._storage.path_of(storage_id)
        for rel in resources:
            target = final / rel
            if rel.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(src / rel, target)  # a rename: the staging directory is beside
        return dict(resources)

    def _put_metadata(self, storage_id: str, metadata: dict[str, Any]) -> dict[str, int]:
        if not isinstance(self._storage, LocalPaths):
            return self._upload_metadata(storage_id, metadata)
        final = self._storage.path_of(storage_id)
        final.mkdir(parents=True, exist_ok=True)
        _write_metadata(final, metadata)
        return {METADATA_FILE: (final / METADATA_FILE).stat().st_size}

    def _upload_metadata(self, storage_id: str, metadata: dict[str, Any]) -> dict[str, int]:
        with _staging("metadata", storage_id) as extra:
            _write_metadata(extra, metadata)
            return self._storage.upload(extra, storage_id)

    def _remove_quietly(self, storage_id: str) -> None:
        try:
            self._storage.delete(storage_id)
        except Exception as exc:
            logger.warning("could not remove the failed checkpoint %s: %s", storage_id, exc)

    @contextlib.contextmanager
    def _store_sharded(self, metadata: Mapping[str, Any] | None) -> Iterator[tuple[Path, str]]:
        storage_id, merged = self._shard_begin(metadata)
        rank = self._dist.rank
        local = isinstance(self._storage, LocalPaths)
        try:
            if isinstance(self._storage, LocalPaths):
                # Beside the checkpoint (the same file system), so storing it is a rename.
                stage = self._storage.path_of(storage_id).parent / f".{storage_id}.rank{rank}"
                stage.mkdir(parents=True)
            else:
                prefix = f"stalwart-store-{storage_id[:8]}-rank{rank}-"
                stage = Path(tempfile.mkdtemp(prefix=prefix))
        except Exception as exc:
            self._shard_check(storage_id, exc, {}, rank)  # fails every rank
            raise
        try:
            mine: Exception | None = None
            try:
                yield stage, storage_id
            except Exception as exc:
                mine = exc
            resources, keep = ({}, None) if mine is not None else _shard_of(stage, None)
            self._shard_check(storage_id, mine, resources, rank)
            self._shard_store(storage_id, merged, stage, resources, keep, move=local)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def _upload_sharded(
        self,
        ckpt_dir: str | os.PathLike[str] | None,
        metadata: Mapping[str, Any] | None,
        selector: Selector | None,
    ) -> str:
        storage_id, merged = self._shard_begin(metadata)
        mine: Exception | None = None
        src: Path | None = None
        source: tuple[int, int, int] | None = None
        resources: dict[str, int] = {}
        keep: Selector | None = None
        try:
            if ckpt_dir is not None:
                src = Path(ckpt_dir)
                if not src.is_dir():
                    raise FileNotFoundError(f"checkpoint directory {src} does not exist")
                # Workers of one node that pass the same directory upload it once.
                st = src.stat()
                source = (self._dist.cross_rank, st.st_dev, st.st_ino)
                resources, keep = _shard_of(src, selector)
        except Exception as exc:
            mine = exc
        owner = self._shard_check(storage_id, mine, resources, source)
        self._shard_store(
            storage_id, merged, src if owner else None, resources, keep, move=False
        )  # copies: ckpt_dir is left alone
        return storage_id

    # -- shared downloads (a node's workers call these in step) -------------------------------

    @contextlib.contextmanager
    def _node_download(
        self, storage_id: str, dst: Path | None, selector: Selector | None
    ) -> Iterator[Path]:
        """``LocalWorkersShareDownload``: the node's first worker downloads the files that any
        worker's selector keeps (all of them when one has no selector) into ``dst``, else into a
        temporary directory kept until every worker's block has ended."""
        dist = self._dist
        what = f"checkpoint {storage_id} not downloaded"
        keep: Selector | None = None
        if any(dist.allgather_local(selector is not None)):
            mine: Exception | None = None
            names: list[str] = []
            if dist.local_rank == 0:
                try:
                    names = [r for r in self._storage.list_resources(storage_id) if r[-1:] != "/"]
                except Exception as exc:
                    mine = exc
            problem, names = dist.broadcast_local((_problem(mine), names))
            _fail_if_any([problem], mine, f"{what} (the node's first worker)")
            kept: list[str] = []
            try:
                kept = [n for n in names if selector is None or selector(n)]
            except Exception as exc:
                mine = exc
            everyone = dist.allgather_local((_problem(mine), kept))
            _fail_if_any([e[0] for e in everyone], mine, f"{what} (a selector failed)")
            wanted = {n for e in everyone for n in e[1]}
            keep = wanted.__contains__
        with contextlib.ExitStack() as stack:
            mine = None
            path = dst
            if dist.local_rank == 0:
                try:
                    if path is None:
                        path = stack.enter_context(_staging("restore", storage_id))
                    self._download(storage_id, path, keep)
                except Exception as exc:
                    mine = exc
            problem, path = dist.broadcast_local((_problem(mine), path))
            _fail_if_any([problem], mine, f"{what} (the node's first worker)")
            assert path is not None
            if dst is not None:
                yield path
                return
            try:
                yield path
            finally:
                dist.gather_local(None)  # the first worker removes it once every block ended

    def delete(self, storage_id: str, globs: list[str] | None = None) -> None:
        """Delete the checkpoint's files (all, or those matching ``globs``) and tell the master
        which are left."""
        self._deleted(storage_id, self._storage.delete(storage_id, globs))


class CheckpointContext(_Checkpoints):
    """Checkpoints of a trial, reported to the master (see the module contract)."""

    def __init__(
        self,
        dist: DistributedContext,
        storage: StorageBackend,
        session: Session,
        *,
        task_id: str,
        allocation_id: str,
        storage_backend_id: Callable[[], int | None],
        before_report: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(dist, storage)
        self._session = session
        self._before_report = before_report
        self._task_id = task_id
        self._allocation_id = allocation_id
        self._storage_backend_id = storage_backend_id

    def _report(self, storage_id: str, resources: dict[str, int], metadata: dict[str, Any]) -> None:
        self._before_report()
        self._session.post(
            "/api/v1/checkpoints",
            {
                "uuid": storage_id,
                "state": "STATE_COMPLETED",
                "metadata": metadata,
                "resources": {k: str(v) for k, v in resources.items()},
                "training": {},
                "taskId": self._task_id,
                "allocationId": self._allocation_id,
                "reportTime": dt.datetime.now(dt.UTC).isoformat(),
                "storageId": self._storage_backend_id(),
            },
        )
        logger.info("Reported checkpoint to master %s", storage_id)

    def _report_failed(self, storage_id: str, metadata: dict[str, Any]) -> None:
        try:
            self._session.post(
                "/api/v1/checkpoints",
                {
                    "uuid": storage_id,
                    "state": "STATE_ERROR",
                    "metadata": metadata,
                    "resources": {},
                    "training": {},
                    "taskId": self._task_id,
                    "allocationId": self._allocation_id,
                    "reportTime": dt.datetime.now(dt.UTC).isoformat(),
                    "storageId": self._storage_backend_id(),
                },
            )
        except Exception as exc:  # the storage failure is what the caller must see
            logger.warning("could not tell the master checkpoint %s failed: %s", storage_id, exc)

    def _deleted(self, storage_id: str, resources: dict[str, int]) -> None:
        left = {k: str(v) for k, v in resources.items()}
        self._session.patch(
            "/api/v1/checkpoints",
            {"checkpoints": [{"uuid": storage_id, "resources": {"resources": left}}]},
        )

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The checkpoint's metadata as the master has it."""
        body = self._session.get(f"/api/v1/checkpoints/{storage_id}")
        metadata = (body.get("checkpoint") or {}).get("metadata")
        return dict(metadata) if isinstance(metadata, dict) else {}


class LocalCheckpointContext(_Checkpoints):
    """Off-cluster twin of :class:`CheckpointContext`."""

    def _report(self, storage_id: str, resources: dict[str, int], metadata: dict[str, Any]) -> None:
        logger.info("saved checkpoint %s in %s", storage_id, self._storage)

    def _deleted(self, storage_id: str, resources: dict[str, int]) -> None:
        logger.info("deleted checkpoint %s", storage_id)

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The checkpoint's ``metadata.json``."""
        with self.restore_path(
            storage_id, DownloadMode.NoSharedDownload, selector=lambda p: p == METADATA_FILE
        ) as path:
            value = json.loads((path / METADATA_FILE).read_text(encoding="utf-8"))
        return dict(value) if isinstance(value, dict) else {}
