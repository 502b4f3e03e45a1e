"""Checkpoint storage on fsspec: ``shared_fs``, ``directory``, ``s3``, ``gcs`` and ``azure``.

One small interface (:class:`StorageBackend`: upload, download, delete, list resources) with
written contracts, one optional ability (:class:`LocalPaths`: the store is a directory the
process can use in place), and one error tree saying what may be retried. The harness
(``stalwart.core``) opens storages from experiment configs with :func:`storage_from_config`.
Cloud stores need their extra (``pip install 'stalwart[s3]'``, ``[gcs]``, ``[azure]``).
See ``docs/contributing/core.md``.
"""

from __future__ import annotations

from stalwart.storage.base import (
    LocalPaths,
    Progress,
    ProgressCallback,
    RetrySettings,
    Selector,
    StorageBackend,
    check_storage_id,
)
from stalwart.storage.cloud import azure_storage, gcs_storage, s3_storage
from stalwart.storage.errors import (
    CheckpointNotFoundError,
    MissingExtraError,
    StorageError,
    StorageUnavailableError,
    is_retryable,
)
from stalwart.storage.factory import (
    config_from_url,
    open_storage,
    shared_fs_base,
    storage_from_config,
)
from stalwart.storage.fs import FsspecStorage, list_local_resources
from stalwart.storage.local import DirectoryStorage

__all__ = [
    "CheckpointNotFoundError",
    "DirectoryStorage",
    "FsspecStorage",
    "LocalPaths",
    "MissingExtraError",
    "Progress",
    "ProgressCallback",
    "RetrySettings",
    "Selector",
    "StorageBackend",
    "StorageError",
    "StorageUnavailableError",
    "azure_storage",
    "check_storage_id",
    "config_from_url",
    "gcs_storage",
    "is_retryable",
    "list_local_resources",
    "open_storage",
    "s3_storage",
    "shared_fs_base",
    "storage_from_config",
]
