"""The checkpoint storage interface: four methods with written contracts, one optional mixin.

A checkpoint is a set of files (and, where the store keeps them, directories) under one
*storage id*, a plain name (a UUID in practice). Paths inside a checkpoint are relative and
``/``-separated; in a *resources* map directories end in ``/`` and have size 0.

Contract of every :class:`StorageBackend`:

- ``upload`` copies a local directory into the checkpoint (creating it, or adding to / replacing
  files of an existing one: idempotent). It blocks until every byte is stored. If it fails, what
  it had written of the checkpoint is removed (best effort) and the error is raised: a partial
  upload is never left looking complete, and nothing here tells the master anything.
- ``download`` copies the checkpoint (or the files ``selector`` keeps) into a local directory.
  Each file appears under its final name only once it is complete.
- ``delete`` removes the checkpoint, or the files matching ``globs``, and returns the resources
  left. Deleting what is not there is not an error (idempotent).
- ``list_resources`` is the checkpoint's resources map (:class:`CheckpointNotFoundError` when it
  does not exist).
- Transfers stream file by file, in chunks where the store supports it; ``progress`` is called
  with a :class:`Progress` as bytes arrive (possibly from an I/O thread of the file system).
- Errors: see :mod:`stalwart.storage.errors` (transient failures are retried inside, then
  raised as :class:`StorageUnavailableError`).

:class:`LocalPaths` is the mixin of stores that are a local or mounted directory: checkpoints can
be written and read in place, so the harness skips the temporary copy.
"""

from __future__ import annotations

import abc
import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from stalwart.storage.errors import CheckpointNotFoundError

__all__ = [
    "LocalPaths",
    "Progress",
    "ProgressCallback",
    "RetrySettings",
    "Selector",
    "StorageBackend",
    "check_storage_id",
]

Selector = Callable[[str], bool]
"""Chooses files by their relative path (``a/b.pt``)."""


@dataclass(frozen=True)
class Progress:
    """How far a transfer is; the totals are known before it starts."""

    bytes_done: int
    bytes_total: int
    files_done: int
    files_total: int

    @property
    def fraction(self) -> float:
        """Bytes done over bytes total (1.0 for an empty transfer)."""
        return self.bytes_done / self.bytes_total if self.bytes_total else 1.0


ProgressCallback = Callable[[Progress], None]
"""Told about a transfer's progress; it must be quick and must not raise."""


@dataclass(frozen=True)
class RetrySettings:
    """How long a backend retries a transient failure of one operation (one file, one listing)
    before raising :class:`~stalwart.storage.errors.StorageUnavailableError`."""

    attempts: int = 6
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 8.0


def check_storage_id(storage_id: str) -> str:
    """``storage_id`` if it is a plain name (no separators, not ``.``/``..``); ValueError
    otherwise."""
    if not storage_id or "/" in storage_id or "\\" in storage_id or storage_id in (".", ".."):
        raise ValueError(f"invalid checkpoint storage id {storage_id!r}")
    return storage_id


class StorageBackend(abc.ABC):
    """Checkpoints in one store (see the module contract)."""

    @abc.abstractmethod
    def upload(
        self,
        src: Path,
        storage_id: str,
        *,
        selector: Selector | None = None,
        progress: ProgressCallback | None = None,
    ) -> dict[str, int]:
        """Store the files of ``src`` (those ``selector`` keeps) as checkpoint ``storage_id``;
        the resources uploaded (directories included when there is no selector)."""

    @abc.abstractmethod
    def download(
        self,
        storage_id: str,
        dst: Path,
        *,
        selector: Selector | None = None,
        progress: ProgressCallback | None = None,
    ) -> dict[str, int]:
        """Copy the checkpoint's files (those ``selector`` keeps) into ``dst`` (created); the
        resources downloaded."""

    @abc.abstractmethod
    def delete(self, storage_id: str, globs: list[str] | None = None) -> dict[str, int]:
        """Delete the checkpoint (all of it, or the files matching ``globs``); the resources
        left ({} when nothing is left)."""

    @abc.abstractmethod
    def list_resources(self, storage_id: str) -> dict[str, int]:
        """The checkpoint's resources map, sorted by path."""


class LocalPaths(abc.ABC):
    """Mixin: the store is a directory this process can read and write in place."""

    @abc.abstractmethod
    def path_of(self, storage_id: str) -> Path:
        """Where checkpoint ``storage_id`` lives (it may not exist)."""

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[Path]:
        """A new, empty directory for the checkpoint; removed again if the block raises."""
        path = self.path_of(storage_id)
        path.mkdir(parents=True)
        try:
            yield path
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise

    def restore_path(self, storage_id: str) -> Path:
        """The checkpoint's directory (CheckpointNotFoundError when it is missing)."""
        path = self.path_of(storage_id)
        if not path.is_dir():
            raise CheckpointNotFoundError(f"checkpoint {storage_id} not found in {path.parent}")
        return path
