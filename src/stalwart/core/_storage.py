"""Opening the trial's checkpoint storage: a thin layer over :mod:`stalwart.storage`.

Contract:

- :func:`storage_from_config` opens an experiment config's ``checkpoint_storage`` (validated by
  the same pydantic models as the master's; :class:`~stalwart.errors.ConfigError` otherwise):
  ``shared_fs``/``directory`` are local directories (:class:`DirectoryStorage`), ``s3``/``gcs``/
  ``azure`` object stores (their extra must be installed, :class:`MissingExtraError` otherwise).
- :func:`storage_from_master` opens the experiment config's storage as the master sent it
  (already validated; ``shared_fs`` without the config models).
- :func:`storage_from_argument` opens what ``core.init(checkpoint_storage=...)`` was given: a
  directory path, an ``s3://``/``gs://`` URL or a config dict; :func:`storage_config_of` is the
  config dict ``runs/start`` reports for it.
- :func:`list_resources` is the ``resources`` map of a local checkpoint directory: every file
  and directory below it, relative, ``/``-separated, directories ending in ``/`` with size 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stalwart.storage import (
    CheckpointNotFoundError,
    DirectoryStorage,
    MissingExtraError,
    Selector,
    StorageBackend,
    config_from_url,
    shared_fs_base,
    storage_from_config,
)
from stalwart.storage import list_local_resources as list_resources

__all__ = [
    "CheckpointNotFoundError",
    "DirectoryStorage",
    "MissingExtraError",
    "Selector",
    "StorageBackend",
    "list_resources",
    "storage_config_of",
    "storage_from_argument",
    "storage_from_config",
    "storage_from_master",
]

StorageArg = str | os.PathLike[str] | Mapping[str, Any]
"""What ``core.init(checkpoint_storage=...)`` accepts."""


def storage_config_of(value: StorageArg) -> dict[str, Any]:
    """The ``checkpoint_storage`` config dict a ``core.init`` argument stands for."""
    if isinstance(value, Mapping):
        return dict(value)
    return config_from_url(value)


def storage_from_master(config: StorageArg) -> StorageBackend:
    """Open the experiment config's ``checkpoint_storage`` as the master sent it: the master
    validated it when the experiment was created, so ``shared_fs`` opens its directory at
    once (:func:`shared_fs_base`, as :func:`open_storage` does) without importing the config
    models, a fifth of a CPU second of every trial's start. Anything else goes through
    :func:`storage_from_argument`."""
    if isinstance(config, Mapping) and config.get("type") == "shared_fs":
        host_path, storage_path = config.get("host_path"), config.get("storage_path")
        if isinstance(host_path, str) and (storage_path is None or isinstance(storage_path, str)):
            return DirectoryStorage(shared_fs_base(host_path, storage_path))
    return storage_from_argument(config)


def storage_from_argument(value: StorageArg) -> StorageBackend:
    """Open ``core.init(checkpoint_storage=...)``: a path, a URL or a config dict."""
    config = storage_config_of(value)
    if config.keys() == {"type", "host_path"} and config["type"] == "shared_fs":
        return DirectoryStorage(Path(config["host_path"]))  # a plain path: no validation needed
    return storage_from_config(config)
