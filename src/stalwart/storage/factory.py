"""Opening a storage from a ``checkpoint_storage`` config or from a path or URL.

Contract:

- :func:`open_storage` takes a validated config model (:mod:`stalwart.config.storage`):
  ``shared_fs`` is ``host_path`` joined with ``storage_path`` (an absolute ``storage_path``
  replaces it; tasks run as processes on the host, so the host path is the task's path),
  ``directory`` is ``container_path``, ``s3``/``gcs``/``azure`` are the object stores of
  :mod:`stalwart.storage.cloud`. Opening does no I/O.
- :func:`storage_from_config` validates a config dict with the same models as the master
  (:class:`~stalwart.errors.ConfigError` listing every problem), then opens it.
- :func:`config_from_url` turns ``s3://bucket/prefix``, ``gs://bucket/prefix`` (or ``gcs://``),
  ``file:///dir`` or a plain directory path into the config dict it stands for (a relative path
  is made absolute against the working directory). Azure needs an account, so it has no URL
  form here (ValueError): pass a config dict.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from stalwart import errors
from stalwart.storage.base import RetrySettings, StorageBackend
from stalwart.storage.cloud import azure_storage, gcs_storage, s3_storage
from stalwart.storage.local import DirectoryStorage

if TYPE_CHECKING:
    from stalwart.config.storage import CheckpointStorageConfig

__all__ = ["config_from_url", "open_storage", "shared_fs_base", "storage_from_config"]


def open_storage(
    config: CheckpointStorageConfig, *, retry: RetrySettings | None = None
) -> StorageBackend:
    """The storage a validated ``checkpoint_storage`` model describes (see the contract)."""
    from stalwart.config import storage as models

    if isinstance(config, models.SharedFSStorage):
        return DirectoryStorage(shared_fs_base(config.host_path, config.storage_path), retry=retry)
    if isinstance(config, models.DirectoryStorage):
        return DirectoryStorage(Path(config.container_path), retry=retry)
    if isinstance(config, models.S3Storage):
        return s3_storage(
            config.bucket,
            config.prefix,
            endpoint_url=config.endpoint_url,
            access_key=config.access_key,
            secret_key=config.secret_key,
            retry=retry,
        )
    if isinstance(config, models.GCSStorage):
        return gcs_storage(config.bucket, config.prefix, retry=retry)
    if isinstance(config, models.AzureStorage):
        return azure_storage(
            config.container,
            connection_string=config.connection_string,
            account_url=config.account_url,
            credential=config.credential,
            retry=retry,
        )
    raise AssertionError(f"unknown checkpoint storage {config!r}")  # pragma: no cover


def shared_fs_base(host_path: str, storage_path: str | None) -> Path:
    """Where ``shared_fs`` checkpoints live: ``host_path`` joined with ``storage_path`` (an
    absolute ``storage_path`` replaces it)."""
    base = Path(host_path)
    return base / storage_path if storage_path else base


def storage_from_config(
    config: Mapping[str, Any], *, retry: RetrySettings | None = None
) -> StorageBackend:
    """Validate a ``checkpoint_storage`` dict and open it (ConfigError when it is invalid)."""
    # Imported here: the config models cost a few hundred milliseconds to import.
    from pydantic import TypeAdapter, ValidationError

    from stalwart.config.storage import CheckpointStorageConfig

    try:
        parsed = TypeAdapter(CheckpointStorageConfig).validate_python(dict(config))
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'checkpoint_storage'}: {e['msg']}"
            for e in exc.errors()
        ]
        raise errors.ConfigError("checkpoint_storage", problems) from None
    return open_storage(parsed, retry=retry)


def config_from_url(value: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``checkpoint_storage`` dict a path or URL stands for (see the contract)."""
    text = os.fspath(value)
    if "://" not in text:
        return {"type": "shared_fs", "host_path": str(Path(text).expanduser().resolve())}
    parsed = urlparse(text)
    scheme = parsed.scheme.lower()
    if scheme == "file":
        return {"type": "shared_fs", "host_path": str(Path(parsed.path).resolve())}
    kinds = {"s3": "s3", "gs": "gcs", "gcs": "gcs"}
    if scheme not in kinds:
        raise ValueError(
            f"checkpoint storage URL {text!r}: use s3://, gs:// or a directory path "
            "(or a checkpoint_storage dict, e.g. for azure)"
        )
    if not parsed.netloc:
        raise ValueError(f"checkpoint storage URL {text!r} has no bucket")
    config: dict[str, Any] = {"type": kinds[scheme], "bucket": parsed.netloc}
    prefix = parsed.path.strip("/")
    if prefix:
        config["prefix"] = prefix
    return config
