""":class:`DirectoryStorage`: checkpoints as directories ``<base>/<storage id>`` on a local or
mounted file system (``shared_fs`` and ``directory`` storage).

It is an :class:`FsspecStorage` over fsspec's local file system (so it shares the transfer code
with the object stores) that also has :class:`LocalPaths`: the harness writes and reads its
checkpoints in place, without a temporary copy. Empty directories are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stalwart.storage.base import LocalPaths, RetrySettings, check_storage_id
from stalwart.storage.fs import FsspecStorage

__all__ = ["DirectoryStorage"]


class DirectoryStorage(FsspecStorage, LocalPaths):
    """Checkpoints in the directory ``base`` (created on the first upload)."""

    def __init__(self, base: Path, *, retry: RetrySettings | None = None) -> None:
        self.base = Path(base)
        """The directory that holds one directory per checkpoint."""
        self._local: Any = None
        super().__init__(
            None,  # fsspec's local file system, made on first use (see fs)
            str(self.base),
            url=str(self.base),
            keeps_directories=True,
            retry=retry,
        )

    @property
    def fs(self) -> Any:
        """fsspec's local file system, imported and made on first use: a trial that never
        moves a checkpoint does not pay fsspec's import (80 ms of CPU)."""
        if self._local is None:
            from fsspec.implementations.local import (  # type: ignore[import-untyped]
                LocalFileSystem,
            )

            self._local = LocalFileSystem(auto_mkdir=True)
        return self._local

    def _root_of(self, root: str) -> str:
        """As fsspec's local file system writes ``root``: absolute, ``~`` expanded, POSIX, no
        trailing ``/`` (without importing fsspec)."""
        return Path(root).expanduser().absolute().as_posix().rstrip("/")

    def __repr__(self) -> str:
        return f"DirectoryStorage({str(self.base)!r})"

    def path_of(self, storage_id: str) -> Path:
        """Where the checkpoint lives (ValueError unless the id is a plain name)."""
        return self.base / check_storage_id(storage_id)
