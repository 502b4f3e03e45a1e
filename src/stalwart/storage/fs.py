""":class:`FsspecStorage`: the :class:`StorageBackend` contract over any fsspec file system.

A checkpoint is the prefix ``<root>/<storage id>/`` of the file system. Object stores (S3, GCS,
Azure Blob) have no empty directories: there a checkpoint's directory entries are derived from
its files' paths, and an empty directory of an uploaded checkpoint is not kept
(``keeps_directories=False``). Local and mounted file systems keep them.

Each file is one operation, retried on transient failures (:func:`is_retryable`) with
exponential backoff per :class:`RetrySettings`; a file being downloaded is written under a
temporary name and renamed once complete.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import logging
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from stalwart.storage.base import (
    Progress,
    ProgressCallback,
    RetrySettings,
    Selector,
    StorageBackend,
    check_storage_id,
)
from stalwart.storage.errors import (
    CheckpointNotFoundError,
    StorageError,
    StorageUnavailableError,
    is_retryable,
)

__all__ = ["FsspecStorage", "list_local_resources", "select"]

logger = logging.getLogger("stalwart.storage")

T = TypeVar("T")


def list_local_resources(path: Path) -> dict[str, int]:
    """Relative path -> size of everything under the local directory ``path`` (directories end
    in ``/`` with size 0), sorted."""
    out: dict[str, int] = {}
    for root, dirs, files in os.walk(path):
        rel = Path(root).relative_to(path)
        for name in dirs:
            out[(rel / name).as_posix() + "/"] = 0
        for name in files:
            out[(rel / name).as_posix()] = (Path(root) / name).stat().st_size
    return dict(sorted(out.items()))


def select(resources: dict[str, int], selector: Selector | None) -> dict[str, int]:
    """The resources a transfer with ``selector`` moves: every entry without one; with one, the
    files it keeps (directories follow from the files)."""
    if selector is None:
        return dict(resources)
    return {rel: size for rel, size in resources.items() if not rel.endswith("/") and selector(rel)}


def _safe_relative(rel: str) -> str:
    parts = PurePosixPath(rel.rstrip("/")).parts
    if not parts or rel.startswith("/") or any(p in ("..", ".") for p in parts):
        raise StorageError(f"refusing the unsafe checkpoint path {rel!r}")
    return rel


class _Transfer:
    """Adds up a transfer's progress over its files and tells ``progress`` (if any)."""

    def __init__(self, progress: ProgressCallback | None, files: dict[str, int]) -> None:
        self._progress = progress
        self._bytes_total = sum(files.values())
        self._files_total = len(files)
        self._bytes_done = 0
        self._files_done = 0
        self._lock = threading.Lock()

    def tell(self, in_flight: int = 0) -> None:
        if self._progress is None:
            return
        with self._lock:
            state = Progress(
                bytes_done=self._bytes_done + in_flight,
                bytes_total=self._bytes_total,
                files_done=self._files_done,
                files_total=self._files_total,
            )
        try:
            self._progress(state)
        except Exception:  # the callback's contract says it must not raise; keep going
            logger.exception("checkpoint progress callback failed")

    def callback(self, size: int) -> Any:
        """A fresh fsspec callback for one attempt at one file of ``size`` bytes."""
        if self._progress is None:
            from fsspec.callbacks import DEFAULT_CALLBACK  # type: ignore[import-untyped]

            return DEFAULT_CALLBACK
        return _file_callback_class()(self, size)

    def file_done(self, size: int) -> None:
        with self._lock:
            self._bytes_done += size
            self._files_done += 1
        self.tell()


@functools.cache
def _file_callback_class() -> type[Any]:
    """The fsspec callback class of :meth:`_Transfer.callback`, made on first use: importing
    fsspec costs a trial's start 80 ms of CPU, and a trial may never move a checkpoint."""
    from fsspec.callbacks import Callback

    class FileCallback(Callback):  # type: ignore[misc]  # fsspec has no type hints
        """Forwards one file's byte counts (as the file system reports them) to its
        transfer."""

        def __init__(self, transfer: _Transfer, size: int) -> None:
            super().__init__(size=size)
            self._transfer = transfer
            self._file_size = size

        def call(self, hook_name: str | None = None, **kwargs: Any) -> None:
            self._transfer.tell(min(int(self.value or 0), self._file_size))

    return FileCallback


class FsspecStorage(StorageBackend):
    """Checkpoints under ``root`` of the fsspec file system ``fs`` (see the module contract)."""

    def __init__(
        self,
        fs: Any,
        root: str,
        *,
        url: str | None = None,
        keeps_directories: bool = False,
        retry: RetrySettings | None = None,
    ) -> None:
        self._fs = fs
        self.root = self._root_of(root)
        """Where checkpoints live in :attr:`fs` (its own path form, no protocol)."""
        self.url = url or self.root
        """The storage as a URL, for messages."""
        self.keeps_directories = keeps_directories
        self.retry = retry or RetrySettings()

    @property
    def fs(self) -> Any:
        """The fsspec file system."""
        return self._fs

    def _root_of(self, root: str) -> str:
        """``root`` in :attr:`fs`'s own path form (no protocol, no trailing ``/``)."""
        return str(self.fs._strip_protocol(root)).rstrip("/") if root else ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def _path(self, storage_id: str, rel: str = "") -> str:
        base = check_storage_id(storage_id)
        if self.root:
            base = f"{self.root}/{base}"
        return f"{base}/{rel}" if rel else base

    def _call(self, what: str, operation: Callable[[], T]) -> T:
        """Run one operation, retrying transient failures; StorageError otherwise."""
        delay = self.retry.initial_backoff_s
        attempt = 1
        while True:
            try:
                return operation()
            except StorageError:
                raise
            except Exception as exc:
                if not is_retryable(exc):
                    raise StorageError(f"{what} in {self.url} failed: {exc}") from exc
                if attempt >= self.retry.attempts:
                    raise StorageUnavailableError(
                        f"{what} in {self.url} failed after {attempt} attempts: {exc}"
                    ) from exc
                logger.warning(
                    "%s in %s failed (%s); retrying in %.1f s", what, self.url, exc, delay
                )
                time.sleep(delay * (1 + 0.1 * random.random()))
                delay = min(delay * 2, self.retry.max_backoff_s)
                attempt += 1

    # -- the interface ------------------------------------------------------------------------

    def list_resources(self, storage_id: str) -> dict[str, int]:
        root = self._path(storage_id)
        entries: dict[str, dict[str, Any]] = self._call(
            f"listing checkpoint {storage_id}",
            lambda: self.fs.find(root, withdirs=True, detail=True),
        )
        out: dict[str, int] = {}
        prefix = root + "/"
        for name, info in entries.items():
            name = str(name).rstrip("/")
            if not name.startswith(prefix):
                continue  # the checkpoint's own directory entry
            rel = name[len(prefix) :]
            if info.get("type") == "directory":
                out[rel + "/"] = 0
                continue
            out[rel] = int(info.get("size") or 0)
            parent = PurePosixPath(rel).parent
            while str(parent) != ".":
                out[f"{parent}/"] = 0
                parent = parent.parent
        if not out and not (self.keeps_directories and self.fs.isdir(root)):
            raise CheckpointNotFoundError(f"checkpoint {storage_id} not found in {self.url}")
        return dict(sorted(out.items()))

    def upload(
        self,
        src: Path,
        storage_id: str,
        *,
        selector: Selector | None = None,
        progress: ProgressCallback | None = None,
    ) -> dict[str, int]:
        """See :meth:`StorageBackend.upload`; FileNotFoundError when ``src`` is not a
        directory."""
        if not src.is_dir():
            raise FileNotFoundError(f"checkpoint directory {src} does not exist")
        dest = self._path(storage_id)
        chosen = select(list_local_resources(src), selector)
        files = {rel: size for rel, size in chosen.items() if not rel.endswith("/")}
        transfer = _Transfer(progress, files)
        try:
            if self.keeps_directories:
                for rel in ["", *(r for r in chosen if r.endswith("/"))]:
                    target = f"{dest}/{rel}".rstrip("/")
                    self._call(
                        "creating a directory", partial(self.fs.makedirs, target, exist_ok=True)
                    )
            transfer.tell()
            for rel, size in files.items():
                put = partial(self._put, str(src / rel), f"{dest}/{rel}", transfer, size)
                self._call(f"uploading {rel}", put)
                transfer.file_done(size)
        except BaseException:
            self._remove_partial(storage_id)
            raise
        if selector is not None or not self.keeps_directories:
            return self._with_parents(files)
        return chosen

    def download(
        self,
        storage_id: str,
        dst: Path,
        *,
        selector: Selector | None = None,
        progress: ProgressCallback | None = None,
    ) -> dict[str, int]:
        chosen = select(self.list_resources(storage_id), selector)
        files = {rel: size for rel, size in chosen.items() if not rel.endswith("/")}
        transfer = _Transfer(progress, files)
        dst.mkdir(parents=True, exist_ok=True)
        for rel in chosen:
            if rel.endswith("/"):
                (dst / _safe_relative(rel)).mkdir(parents=True, exist_ok=True)
        transfer.tell()
        for rel, size in files.items():
            target = dst / _safe_relative(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            remote = self._path(storage_id, rel)
            get = partial(self._get_atomic, remote, target, transfer, size)
            self._call(f"downloading {rel}", get)
            transfer.file_done(size)
        return self._with_parents(chosen) if selector is not None else chosen

    def delete(self, storage_id: str, globs: list[str] | None = None) -> dict[str, int]:
        try:
            resources = self.list_resources(storage_id)
        except CheckpointNotFoundError:
            return {}
        root = self._path(storage_id)
        if globs:
            doomed = [
                rel
                for rel in resources
                if not rel.endswith("/") and any(fnmatch.fnmatch(rel, g) for g in globs)
            ]
            if doomed:
                paths = [f"{root}/{rel}" for rel in doomed]
                self._call("deleting files", lambda: self.fs.rm(paths))
            left = {rel: size for rel, size in resources.items() if rel not in set(doomed)}
            if not self.keeps_directories:
                left = self._with_parents({k: v for k, v in left.items() if not k.endswith("/")})
            if not all(rel.endswith("/") for rel in left):
                return left
        self._call(f"deleting checkpoint {storage_id}", lambda: self._rm_tree(root))
        return {}

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _with_parents(files: dict[str, int]) -> dict[str, int]:
        """``files`` plus the directory entries of their parents, sorted."""
        out = dict(files)
        for rel in files:
            parent = PurePosixPath(rel.rstrip("/")).parent
            while str(parent) != ".":
                out[f"{parent}/"] = 0
                parent = parent.parent
        return dict(sorted(out.items()))

    def _rm_tree(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path, recursive=True)

    def _put(self, local: str, remote: str, transfer: _Transfer, size: int) -> None:
        self.fs.put_file(local, remote, callback=transfer.callback(size))

    def _get_atomic(self, remote: str, target: Path, transfer: _Transfer, size: int) -> None:
        """Download into a temporary file beside ``target``, then rename it."""
        fd, part = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        os.close(fd)
        try:
            self.fs.get_file(remote, part, callback=transfer.callback(size))
            os.replace(part, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(part)
            raise

    def _remove_partial(self, storage_id: str) -> None:
        """Best effort: remove what a failed upload wrote (logged when that fails too)."""
        try:
            self._rm_tree(self._path(storage_id))
        except Exception as exc:
            logger.warning(
                "could not remove the partial checkpoint %s from %s: %s", storage_id, self.url, exc
            )
