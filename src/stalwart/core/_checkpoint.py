"""``CheckpointContext``: save checkpoints to storage and report them to the master.

Contract:

- A checkpoint is a directory named by a new UUID (its *storage id*) in the trial's checkpoint
  storage, with the user's ``metadata.json`` beside the user's files.
- ``metadata`` must hold ``steps_completed`` (:class:`ValueError` otherwise, checked before
  anything is written) and be JSON (:class:`TypeError` otherwise).
- ``store_path`` and ``upload`` report the checkpoint once its files are complete: ``POST
  /api/v1/checkpoints`` (wire doc 5.5) with every file and directory as ``resources`` (sizes as
  strings, ``metadata.json`` included). The report is idempotent on the UUID, so a retry after a
  master restart is safe. If the ``store_path`` block raises, its directory is removed and
  nothing is reported.
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
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from stalwart.core._client import Session
from stalwart.core._distributed import DistributedContext
from stalwart.core._json import jsonable
from stalwart.core._storage import DirectoryStorage, Selector, list_resources

__all__ = ["CheckpointContext", "DownloadMode", "LocalCheckpointContext"]

logger = logging.getLogger("stalwart.core")

METADATA_FILE = "metadata.json"


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


class _Checkpoints:
    """Storage operations shared by both twins; subclasses say how a checkpoint is reported."""

    def __init__(self, dist: DistributedContext, storage: DirectoryStorage) -> None:
        self._dist = dist
        self._storage = storage

    @property
    def storage(self) -> DirectoryStorage:
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

    def _finish(self, storage_id: str, path: Path, metadata: dict[str, Any]) -> None:
        (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2), encoding="utf-8")
        self._report(storage_id, list_resources(path), metadata)

    @contextlib.contextmanager
    def store_path(
        self, metadata: Mapping[str, Any] | None = None, *, shard: bool = False
    ) -> Iterator[tuple[Path, str]]:
        """A new checkpoint directory to save into: ``with ... as (path, storage_id):``; the
        checkpoint is reported when the block ends. ``shard`` is accepted (one process)."""
        checked = _checked_metadata(metadata)
        self._chief_only("store_path")
        storage_id = str(uuid.uuid4())
        with self._storage.store_path(storage_id) as path:
            yield path, storage_id
        self._finish(storage_id, path, checked)

    @contextlib.contextmanager
    def restore_path(
        self,
        storage_id: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> Iterator[Path]:
        """The checkpoint's local directory for the duration of the block (storage is local,
        so nothing is downloaded; ``selector`` is accepted)."""
        DownloadMode(download_mode)
        yield self._storage.restore_path(storage_id)

    def upload(
        self,
        ckpt_dir: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        *,
        shard: bool = False,
        selector: Selector | None = None,
    ) -> str:
        """Copy the files of ``ckpt_dir`` (those ``selector`` keeps) into a new checkpoint and
        report it; its storage id. ``ckpt_dir`` itself is not changed."""
        checked = _checked_metadata(metadata)
        self._chief_only("upload")
        storage_id = str(uuid.uuid4())
        path = self._storage.upload(Path(ckpt_dir), storage_id, selector)
        self._finish(storage_id, path, checked)
        return storage_id

    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike[str],
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> None:
        """Copy the checkpoint's files into ``ckpt_dir`` (created if needed)."""
        DownloadMode(download_mode)
        self._storage.download(storage_id, Path(ckpt_dir), selector)

    def delete(self, storage_id: str, globs: list[str] | None = None) -> None:
        """Delete the checkpoint's files (all, or those matching ``globs``) and tell the master
        which are left."""
        self._deleted(storage_id, self._storage.delete(storage_id, globs))


class CheckpointContext(_Checkpoints):
    """Checkpoints of a trial, reported to the master (see the module contract)."""

    def __init__(
        self,
        dist: DistributedContext,
        storage: DirectoryStorage,
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
        logger.info("saved checkpoint %s in %s", storage_id, self._storage.base)

    def _deleted(self, storage_id: str, resources: dict[str, int]) -> None:
        logger.info("deleted checkpoint %s", storage_id)

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The checkpoint's ``metadata.json``."""
        path = self._storage.restore_path(storage_id) / METADATA_FILE
        value = json.loads(path.read_text(encoding="utf-8"))
        return dict(value) if isinstance(value, dict) else {}
