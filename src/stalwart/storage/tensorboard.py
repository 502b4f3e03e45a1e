"""A trial's TensorBoard files in its experiment's checkpoint storage.

Determined's layout, which the official harness uploads to and Stalwart's harness and
TensorBoard tasks use too: ``<storage base>/<cluster id>/tensorboard/experiment/<e>/trial/<t>/``
followed by the file's path relative to the trial's TensorBoard directory. The storage base is
the checkpoint storage's root (``shared_fs``: ``host_path`` joined with ``storage_path``;
``directory``: ``container_path``; object stores: bucket or container and ``prefix``).

Contract of :class:`TensorboardFiles`:

- It works on any :class:`FsspecStorage` (every storage :func:`storage_from_config` opens) and
  retries transient failures as checkpoint transfers do.
- :meth:`~TensorboardFiles.upload` replaces the file. On local and mounted file systems it
  writes a hidden temporary file beside the target and renames it, so a reader never sees a
  partly copied file; object stores replace objects atomically anyway.
- :meth:`~TensorboardFiles.list_files` is every file (relative path -> size), without hidden
  files (a name starting with ``.``, e.g. an upload in flight); ``{}`` when there is none.
- :meth:`~TensorboardFiles.fetch` brings one file to a local path the way TensorBoard can follow
  while it reads: a new file appears complete (temporary file, rename), a grown file gets its
  new bytes appended in place (event files only grow), a shrunk file is rewritten in place.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from pathlib import Path, PurePosixPath

from stalwart.storage.base import StorageBackend
from stalwart.storage.fs import FsspecStorage, _safe_relative

__all__ = ["TensorboardFiles", "tensorboard_prefix"]


def tensorboard_prefix(cluster_id: str, experiment_id: int, trial_id: int) -> str:
    """``<cluster id>/tensorboard/experiment/<e>/trial/<t>`` (ValueError for a cluster id that
    is not a plain name)."""
    if not cluster_id or "/" in cluster_id or cluster_id in (".", ".."):
        raise ValueError(f"invalid cluster id {cluster_id!r}")
    return f"{cluster_id}/tensorboard/experiment/{int(experiment_id)}/trial/{int(trial_id)}"


class TensorboardFiles:
    """The TensorBoard files of one trial in ``storage`` (see the module contract)."""

    def __init__(
        self, storage: StorageBackend, cluster_id: str, experiment_id: int, trial_id: int
    ) -> None:
        if not isinstance(storage, FsspecStorage):
            raise TypeError(f"TensorBoard files need an fsspec storage, not {storage!r}")
        self.storage = storage
        self.prefix = tensorboard_prefix(cluster_id, experiment_id, trial_id)
        self.root = f"{storage.root}/{self.prefix}" if storage.root else self.prefix
        """The trial's directory in the file system (its own path form)."""
        self.url = f"{storage.url.rstrip('/')}/{self.prefix}"
        """The trial's directory as a URL, for messages."""

    def __repr__(self) -> str:
        return f"TensorboardFiles({self.url!r})"

    def _remote(self, rel: str) -> str:
        return f"{self.root}/{_safe_relative(rel)}"

    def upload(self, src: Path, rel: str) -> None:
        """Store the local file ``src`` as ``rel`` (replacing it)."""
        fs = self.storage.fs
        target = self._remote(rel)
        if not self.storage.keeps_directories:
            self.storage._call(f"uploading {rel}", lambda: fs.put_file(str(src), target))
            return
        # No "tfevents" in the temporary name: TensorBoard would take it for an event file.
        part = str(PurePosixPath(target).with_name(f".upload-{uuid.uuid4().hex}"))

        def put() -> None:
            fs.makedirs(str(PurePosixPath(target).parent), exist_ok=True)
            fs.put_file(str(src), part)
            fs.mv(part, target)

        try:
            self.storage._call(f"uploading {rel}", put)
        except BaseException:
            with contextlib.suppress(Exception):
                fs.rm(part)
            raise

    def list_files(self) -> dict[str, int]:
        """Relative path -> size of every file (see the module contract), sorted."""
        root = self.root
        entries = self.storage._call(
            f"listing {self.url}", lambda: self.storage.fs.find(root, detail=True)
        )
        out: dict[str, int] = {}
        prefix = root.rstrip("/") + "/"
        for name, info in entries.items():
            name = str(name)
            if not name.startswith(prefix) or info.get("type") == "directory":
                continue
            rel = name[len(prefix) :]
            if any(part.startswith(".") for part in PurePosixPath(rel).parts):
                continue
            out[rel] = int(info.get("size") or 0)
        return dict(sorted(out.items()))

    def fetch(self, rel: str, dst: Path, size: int) -> int:
        """Bring ``rel`` (``size`` bytes, as listed) to ``dst``; the bytes written."""
        remote = self._remote(rel)
        fs = self.storage.fs
        have = dst.stat().st_size if dst.is_file() else None
        if have is None:
            dst.parent.mkdir(parents=True, exist_ok=True)
            fd, part = tempfile.mkstemp(dir=dst.parent, prefix=".download-", suffix=".part")
            os.close(fd)
            try:
                self.storage._call(f"downloading {rel}", lambda: fs.get_file(remote, part))
                os.replace(part, dst)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(part)
                raise
            return dst.stat().st_size
        if size == have:
            return 0
        if size > have:
            tail: bytes = self.storage._call(
                f"downloading {rel}", lambda: fs.cat_file(remote, start=have, end=size)
            )
            with dst.open("ab") as out:
                out.write(tail)
            return len(tail)
        whole: bytes = self.storage._call(f"downloading {rel}", lambda: fs.cat_file(remote))
        with dst.open("r+b") as out:
            out.write(whole)
            out.truncate()
        return len(whole)
