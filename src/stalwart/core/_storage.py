"""Checkpoint storage the harness can open today: a directory ``<base>/<uuid>`` per checkpoint.

Contract:

- :func:`storage_from_config` opens an experiment config's ``checkpoint_storage`` (validated by
  the same pydantic models as the master's): ``shared_fs`` is ``host_path`` (joined with
  ``storage_path`` when set) and ``directory`` is ``container_path``. Tasks run as processes on
  the host, so the host path is the task's path. ``s3``, ``gcs`` and ``azure`` raise
  :class:`NotImplementedError` naming the type (they come with ``stalwart.storage``).
- :func:`storage_from_argument` opens what ``core.init(checkpoint_storage=...)`` was given: a
  directory path string or a config dict.
- :func:`list_resources` is the ``resources`` map of a checkpoint: every file and directory below
  it, relative, ``/``-separated, directories ending in ``/`` with size 0.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from stalwart import errors

__all__ = [
    "CheckpointNotFoundError",
    "DirectoryStorage",
    "Selector",
    "list_resources",
    "storage_config_of",
    "storage_from_argument",
    "storage_from_config",
]

Selector = Callable[[str], bool]
"""Chooses files by their relative path (``a/b.pt``)."""

_NOT_YET = ("s3", "gcs", "azure")


class CheckpointNotFoundError(errors.NotFoundError):
    """No checkpoint with that storage id in this storage."""

    code = "checkpoint_not_found"


def list_resources(path: Path) -> dict[str, int]:
    """Relative path -> size of everything under ``path`` (directories end in ``/``, size 0)."""
    out: dict[str, int] = {}
    for root, dirs, files in os.walk(path):
        rel = Path(root).relative_to(path)
        for name in dirs:
            out[(rel / name).as_posix() + "/"] = 0
        for name in files:
            out[(rel / name).as_posix()] = (Path(root) / name).stat().st_size
    return dict(sorted(out.items()))


def _copy(src: Path, dst: Path, selector: Selector | None) -> None:
    """Copy the files under ``src`` into ``dst`` (created), keeping relative paths."""
    dst.mkdir(parents=True, exist_ok=True)
    for rel in list_resources(src):
        if rel.endswith("/"):
            if selector is None:
                (dst / rel).mkdir(parents=True, exist_ok=True)
            continue
        if selector is not None and not selector(rel):
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)


class DirectoryStorage:
    """Checkpoints as directories ``<base>/<storage id>`` on a local or mounted file system."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def __repr__(self) -> str:
        return f"DirectoryStorage({str(self.base)!r})"

    def path_of(self, storage_id: str) -> Path:
        """Where the checkpoint lives (the id must be a plain name)."""
        if not storage_id or "/" in storage_id or "\\" in storage_id or storage_id in (".", ".."):
            raise ValueError(f"invalid checkpoint storage id {storage_id!r}")
        return self.base / storage_id

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
        """The checkpoint's directory (:class:`CheckpointNotFoundError` when it is missing)."""
        path = self.path_of(storage_id)
        if not path.is_dir():
            raise CheckpointNotFoundError(f"checkpoint {storage_id} not found in {self.base}")
        return path

    def upload(self, src: Path, storage_id: str, selector: Selector | None = None) -> Path:
        """Copy the files of ``src`` into a new checkpoint directory; its path."""
        if not src.is_dir():
            raise FileNotFoundError(f"checkpoint directory {src} does not exist")
        path = self.path_of(storage_id)
        path.mkdir(parents=True)
        _copy(src, path, selector)
        return path

    def download(self, storage_id: str, dst: Path, selector: Selector | None = None) -> None:
        """Copy the checkpoint's files into ``dst`` (created if needed)."""
        _copy(self.restore_path(storage_id), dst, selector)

    def delete(self, storage_id: str, globs: list[str] | None = None) -> dict[str, int]:
        """Delete the checkpoint (all of it, or the files matching ``globs``); the resources
        left (empty when all is gone)."""
        path = self.restore_path(storage_id)
        if not globs:
            shutil.rmtree(path)
            return {}
        for rel in list_resources(path):
            if not rel.endswith("/") and any(fnmatch.fnmatch(rel, g) for g in globs):
                (path / rel).unlink()
        left = list_resources(path)
        if all(rel.endswith("/") for rel in left):
            shutil.rmtree(path)
            return {}
        return left


def _not_yet(kind: str) -> NotImplementedError:
    return NotImplementedError(
        f"checkpoint_storage type {kind!r} is not supported by stalwart.core yet "
        "(supported: shared_fs, directory)"
    )


def storage_from_config(config: Mapping[str, Any]) -> DirectoryStorage:
    """Open a ``checkpoint_storage`` config (see the module contract)."""
    kind = config.get("type")
    if kind in _NOT_YET:
        raise _not_yet(str(kind))
    # Imported here: the config models cost a few hundred milliseconds to import.
    from pydantic import TypeAdapter, ValidationError

    from stalwart.config.storage import CheckpointStorageConfig, SharedFSStorage

    try:
        parsed = TypeAdapter(CheckpointStorageConfig).validate_python(dict(config))
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'checkpoint_storage'}: {e['msg']}"
            for e in exc.errors()
        ]
        raise errors.ConfigError("checkpoint_storage", problems) from None
    if isinstance(parsed, SharedFSStorage):
        base = Path(parsed.host_path)
        if parsed.storage_path:
            base = base / parsed.storage_path  # an absolute storage_path replaces host_path
        return DirectoryStorage(base)
    container_path = getattr(parsed, "container_path", None)
    if parsed.type != "directory" or not container_path:  # pragma: no cover - union is closed
        raise _not_yet(parsed.type)
    return DirectoryStorage(Path(container_path))


def storage_from_argument(value: str | os.PathLike[str] | Mapping[str, Any]) -> DirectoryStorage:
    """Open ``core.init(checkpoint_storage=...)``: a directory path or a config dict."""
    if isinstance(value, Mapping):
        return storage_from_config(value)
    text = os.fspath(value)
    scheme = text.split("://", 1)[0] if "://" in text else ""
    if scheme:
        raise _not_yet({"gs": "gcs"}.get(scheme, scheme))
    return DirectoryStorage(Path(text).expanduser().resolve())


def storage_config_of(value: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """The config dict ``runs/start`` reports for a ``checkpoint_storage`` argument."""
    if isinstance(value, Mapping):
        return dict(value)
    return {"type": "shared_fs", "host_path": str(storage_from_argument(value).base)}
