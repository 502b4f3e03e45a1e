"""Checkpoint files in storage, handled by the master: removing files by glob (``det checkpoint
rm``, the SDK's ``Checkpoint.remove_files``), and an experiment's TensorBoard files.

Determined runs a checkpoint-GC task for these; Stalwart's master opens the checkpoint storage
itself (:mod:`stalwart.storage`), as its own checkpoint GC does, so the work is done when the
call returns.

Contracts:

- A checkpoint's storage is the ``storageId`` it was reported with, else its experiment's
  ``checkpoint_storage``, else the master's default (:func:`storage_of`).
- Globs follow Determined's (Python's recursive ``glob``): relative to the checkpoint's
  directory, ``*`` stays within one path segment, ``**`` spans any number of them, and a
  matched directory goes with everything under it. An empty glob, an absolute one or one
  containing ``..`` is refused (InvalidArgumentError) before anything is deleted.
- :func:`remove_files` deletes the matching files of every checkpoint, then records what is
  left as ``PATCH /api/v1/checkpoints`` does: nothing left means DELETED, a change means
  PARTIALLY_DELETED. With no globs nothing is deleted and the records are refreshed from
  storage. A DELETED checkpoint's leftover files are removed; its record stays DELETED.
- :func:`delete_tensorboard_files` removes every trial's TensorBoard files of an experiment
  (``<cluster id>/tensorboard/experiment/<e>/``) from the experiment's checkpoint storage and
  answers how many files went; none there is not an error.
- :func:`set_gc_policy` changes an experiment's ``save_*`` counts; the cluster loop's
  checkpoint GC applies them once the experiment has ended (again, if it was collected).
- Storage failures are :class:`~stalwart.storage.errors.StorageError` with the storage named.
"""

from __future__ import annotations

import contextlib
import fnmatch
import shutil
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError, NotFoundError
from stalwart.master.db.tables import Checkpoint, Experiment, StorageBackend
from stalwart.master.services.checkpoints import get_checkpoint, patch_checkpoint_resources
from stalwart.master.services.experiment_config import typed_config
from stalwart.storage.base import LocalPaths
from stalwart.storage.base import StorageBackend as Storage
from stalwart.storage.errors import CheckpointNotFoundError
from stalwart.storage.factory import open_storage, storage_from_config
from stalwart.storage.fs import FsspecStorage

__all__ = [
    "check_globs",
    "delete_tensorboard_files",
    "glob_matches",
    "remove_files",
    "set_gc_policy",
    "storage_of",
]


def check_globs(globs: Sequence[str]) -> list[str]:
    """The globs, if each is safe to apply inside a checkpoint (see the contract)."""
    for glob in globs:
        if not glob:
            raise InvalidArgumentError("cannot have empty string glob")
        if ".." in glob:
            raise InvalidArgumentError(f"glob '{glob}' cannot contain '..'")
        if glob.startswith("/"):
            raise InvalidArgumentError(f"glob '{glob}' must be relative to the checkpoint")
    return list(globs)


def _match_parts(path: Sequence[str], pattern: Sequence[str]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match_parts(path[i:], rest) for i in range(len(path) + 1))
    if not path or not fnmatch.fnmatchcase(path[0], head):
        return False
    if path[0].startswith(".") and not head.startswith("."):
        return False  # glob's rule: wildcards skip hidden names
    return _match_parts(path[1:], rest)


def glob_matches(rel: str, glob: str) -> bool:
    """Whether the checkpoint path ``rel`` (a directory ends in ``/``) matches ``glob``."""
    parts = [p for p in PurePosixPath(rel.rstrip("/")).parts if p]
    pattern = [p for p in glob.strip("/").split("/") if p]
    return _match_parts(parts, pattern)


def _doomed(resources: Mapping[str, int], globs: Sequence[str]) -> list[str]:
    """The files (not directory entries) that the globs delete."""
    matched_dirs = [
        rel for rel in resources if rel.endswith("/") and any(glob_matches(rel, g) for g in globs)
    ]
    out = []
    for rel in resources:
        if rel.endswith("/"):
            continue
        if any(glob_matches(rel, g) for g in globs) or any(rel.startswith(d) for d in matched_dirs):
            out.append(rel)
    return out


def _literal(rel: str) -> str:
    """``rel`` as an fnmatch pattern that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in rel)


def storage_of(session: Session, ckpt: Checkpoint, default: Mapping[str, Any]) -> Storage:
    """The storage that holds ``ckpt`` (see the contract)."""
    if ckpt.storage_id is not None:
        backend = session.get(StorageBackend, ckpt.storage_id)
        if backend is not None:
            return storage_from_config(backend.config)
    experiment = session.get(Experiment, ckpt.experiment_id) if ckpt.experiment_id else None
    if experiment is not None:
        config = typed_config(experiment).checkpoint_storage
        if config is not None:
            return open_storage(config)
    return storage_from_config(default)


def _apply(storage: Storage, uuid: str, globs: Sequence[str]) -> dict[str, int]:
    try:
        resources = storage.list_resources(uuid)
    except CheckpointNotFoundError:
        return {}
    if not globs:
        return resources
    doomed = _doomed(resources, globs)
    if doomed:
        left = storage.delete(uuid, [_literal(rel) for rel in doomed])
        if not left:
            return {}
    dirs = [
        rel for rel in resources if rel.endswith("/") and any(glob_matches(rel, g) for g in globs)
    ]
    if dirs and isinstance(storage, LocalPaths):
        # matched directories go too (emptied above), as Determined's glob delete does
        base = storage.path_of(uuid)
        for rel in sorted(dirs, key=len, reverse=True):
            with contextlib.suppress(OSError):
                shutil.rmtree(base / rel)
    elif not doomed:
        return resources
    try:
        return storage.list_resources(uuid)
    except CheckpointNotFoundError:
        return {}


def remove_files(
    session: Session,
    uuids: Sequence[str],
    globs: Sequence[str],
    *,
    default_storage: Mapping[str, Any],
) -> list[Checkpoint]:
    """Delete the files matching ``globs`` from each checkpoint and record what is left (see
    the contract). Commits each checkpoint's record after its files are gone."""
    if not uuids:
        raise InvalidArgumentError("checkpointUuids is empty")
    check_globs(globs)
    ckpts = [get_checkpoint(session, uuid) for uuid in dict.fromkeys(uuids)]
    storages = [storage_of(session, ckpt, default_storage) for ckpt in ckpts]
    for ckpt, storage in zip(ckpts, storages, strict=True):
        left = _apply(storage, ckpt.uuid, globs)
        if ckpt.state == "DELETED":
            continue
        if ckpt.state == "ACTIVE" or (ckpt.state == "ERROR" and left):
            ckpt.resources = left  # no PARTIALLY_DELETED edge from these states
            ckpt.size = sum(left.values())
        else:
            patch_checkpoint_resources(session, ckpt.uuid, left, caller_allocation_id=None)
        session.commit()
    return ckpts


def delete_tensorboard_files(
    session: Session, experiment_id: int, cluster_id: str, *, default_storage: Mapping[str, Any]
) -> int:
    """Remove the experiment's TensorBoard files; how many files went (see the contract)."""
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    config = typed_config(experiment).checkpoint_storage
    storage = open_storage(config) if config is not None else storage_from_config(default_storage)
    if not isinstance(storage, FsspecStorage):
        return 0
    prefix = f"{cluster_id}/tensorboard/experiment/{int(experiment_id)}"
    root = f"{storage.root}/{prefix}" if storage.root else prefix
    fs = storage.fs
    if not fs.exists(root):
        return 0
    files = [p for p in fs.find(root) if str(p).rstrip("/") != root]
    fs.rm(root, recursive=True)
    return len(files)


_GC_KEYS = ("save_experiment_best", "save_trial_best", "save_trial_latest")
_MAX_COUNT = 2**31 - 1  # int32 on Determined's wire


def set_gc_policy(session: Session, experiment_id: int, counts: Mapping[str, int | None]) -> None:
    """Change an experiment's checkpoint GC policy (``det e set gc-policy``): the ``save_*``
    counts given (None: unchanged) go into its config's ``checkpoint_storage``; an ended
    experiment is collected again under the new policy by the cluster loop, which deletes the
    COMPLETED checkpoints it no longer keeps (registered ones never). InvalidArgumentError for
    a count outside 0..2**31-1 or a config without a storage. Flushes; the caller commits."""
    experiment = session.get(Experiment, experiment_id)
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} not found")
    for key in _GC_KEYS:
        value = counts.get(key)
        if value is not None and not 0 <= value <= _MAX_COUNT:
            raise InvalidArgumentError(f"{key} must be between 0 and {_MAX_COUNT}, not {value}")
    config = dict(experiment.config or {})
    storage = dict(config.get("checkpoint_storage") or {})
    if "type" not in storage:
        raise InvalidArgumentError(
            f"experiment {experiment_id} has no checkpoint storage in its config: no GC policy "
            "to change"
        )
    storage.update({k: counts[k] for k in _GC_KEYS if counts.get(k) is not None})
    config["checkpoint_storage"] = storage
    experiment.config = config
    experiment.checkpoints_collected = False  # only ended experiments are collected
    session.flush()
