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
  UUID, so a retry after a master restart is safe. If the ``store_path`` block raises, its
  directory is removed and nothing is uploaded or reported.
- Only the chief (rank 0) saves; restoring is allowed on every rank.
- :class:`LocalCheckpointContext` is the off-cluster twin: the same files, no master; metadata is
  read back from ``metadata.json``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from stalwart.core._client import Session
from stalwart.core._distributed import DistributedContext
from stalwart.core._json import jsonable
from stalwart.storage import LocalPaths, Progress, Selector, StorageBackend, list_local_resources

__all__ = ["CheckpointContext", "DownloadMode", "LocalCheckpointContext"]

logger = logging.getLogger("stalwart.core")

METADATA_FILE = "metadata.json"
PROGRESS_LOG_INTERVAL_S = 10.0
"""How often a long transfer logs its progress."""


class DownloadMode(enum.Enum):
    """Whether the workers of a node share one download (all must call in step) or not."""

    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"


def _checked_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    value = jsonable(metadata or {}, "metadata")
    if not isinstance(value, dict):
        raise TypeError(f"checkpoint metadata must be a dict, got {type(metadata).__name__}")
    if "steps_completed" not in value:
        raise ValueError(
            "metadata for reported checkpoints requires a 'steps_completed' item, which has "
            "not been provided"
        )
    return value


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
        checkpoint is stored and reported when the block ends. ``shard`` is accepted (one
        process)."""
        checked = _checked_metadata(metadata)
        self._chief_only("store_path")
        storage_id = str(uuid.uuid4())
        if isinstance(self._storage, LocalPaths):
            with self._storage.store_path(storage_id) as path:
                yield path, storage_id
            _write_metadata(path, checked)
            self._report(storage_id, list_local_resources(path), checked)
            return
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
        ``selector`` keeps."""
        DownloadMode(download_mode)
        if isinstance(self._storage, LocalPaths):
            yield self._storage.restore_path(storage_id)
            return
        with _staging("restore", storage_id) as path:
            self._download(storage_id, path, selector)
            yield path

    def upload(
        self,
        ckpt_dir: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        *,
        shard: bool = False,
        selector: Selector | None = None,
    ) -> str:
        """Store the files of ``ckpt_dir`` (those ``selector`` keeps) as a new checkpoint and
        report it; its storage id. ``ckpt_dir`` itself is not changed."""
        checked = _checked_metadata(metadata)
        self._chief_only("upload")
        src = Path(ckpt_dir)
        if not src.is_dir():
            raise FileNotFoundError(f"checkpoint directory {src} does not exist")
        storage_id = str(uuid.uuid4())
        resources = self._upload(src, storage_id, selector)
        with _staging("metadata", storage_id) as extra:
            _write_metadata(extra, checked)
            resources |= self._storage.upload(extra, storage_id)
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
        needed)."""
        DownloadMode(download_mode)
        self._download(storage_id, Path(ckpt_dir), selector)

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
        storage_backend_id: int | None,
    ) -> None:
        super().__init__(dist, storage)
        self._session = session
        self._task_id = task_id
        self._allocation_id = allocation_id
        self._storage_backend_id = storage_backend_id

    def _report(self, storage_id: str, resources: dict[str, int], metadata: dict[str, Any]) -> None:
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
                "storageId": self._storage_backend_id,
            },
        )
        logger.info("Reported checkpoint to master %s", storage_id)

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
        with self.restore_path(storage_id, selector=lambda p: p == METADATA_FILE) as path:
            value = json.loads((path / METADATA_FILE).read_text(encoding="utf-8"))
        return dict(value) if isinstance(value, dict) else {}
