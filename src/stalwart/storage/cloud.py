"""The object stores: S3 (s3fs), Google Cloud Storage (gcsfs) and Azure Blob Storage (adlfs).

Contract:

- Each is an optional extra (``stalwart[s3]``, ``[gcs]``, ``[azure]``), imported only when a
  storage of that type is opened; a missing package raises :class:`MissingExtraError` naming
  the extra to install.
- Options are Determined's ``checkpoint_storage`` fields. Credentials that are not given come
  from the environment, as each SDK finds them (``AWS_*`` variables and files, IAM roles,
  ``GOOGLE_APPLICATION_CREDENTIALS``, Azure's default credential chain).
- Checkpoints live under ``<bucket or container>/<prefix>/<storage id>/``. File system instances
  are not shared between storages (no fsspec instance cache), so one storage's options never
  leak into another's.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from urllib.parse import urlparse

from stalwart.storage.base import RetrySettings
from stalwart.storage.errors import MissingExtraError
from stalwart.storage.fs import FsspecStorage

__all__ = ["azure_storage", "gcs_storage", "s3_storage"]


def _require(kind: str, package: str, extra: str) -> ModuleType:
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingExtraError(kind, package, extra) from exc


def _root(bucket: str, prefix: str | None) -> str:
    return "/".join(part.strip("/") for part in (bucket, prefix or "") if part.strip("/"))


def s3_storage(
    bucket: str,
    prefix: str | None = None,
    *,
    endpoint_url: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    retry: RetrySettings | None = None,
) -> FsspecStorage:
    """Checkpoints in ``s3://bucket/prefix`` (any S3-compatible store with ``endpoint_url``)."""
    s3fs = _require("s3", "s3fs", "s3")
    fs = s3fs.S3FileSystem(
        key=access_key,
        secret=secret_key,
        endpoint_url=endpoint_url,
        skip_instance_cache=True,
    )
    root = _root(bucket, prefix)
    return FsspecStorage(fs, root, url=f"s3://{root}", retry=retry)


def gcs_storage(
    bucket: str, prefix: str | None = None, *, retry: RetrySettings | None = None
) -> FsspecStorage:
    """Checkpoints in ``gs://bucket/prefix`` (credentials from the environment)."""
    gcsfs = _require("gcs", "gcsfs", "gcs")
    fs = gcsfs.GCSFileSystem(skip_instance_cache=True)
    root = _root(bucket, prefix)
    return FsspecStorage(fs, root, url=f"gs://{root}", retry=retry)


def azure_storage(
    container: str,
    *,
    connection_string: str | None = None,
    account_url: str | None = None,
    credential: str | None = None,
    retry: RetrySettings | None = None,
) -> FsspecStorage:
    """Checkpoints in an Azure Blob container, reached by ``connection_string`` or by
    ``account_url`` (``https://<account>.blob.core.windows.net``) with ``credential`` (a SAS
    token or an account key; unset: Azure's default credential chain)."""
    adlfs = _require("azure", "adlfs", "azure")
    if connection_string is not None:
        fs = adlfs.AzureBlobFileSystem(
            connection_string=connection_string, skip_instance_cache=True
        )
    else:
        host = urlparse(account_url or "").hostname
        if not host:
            raise ValueError(f"azure account_url {account_url!r} has no host name")
        options: dict[str, str] = {"account_name": host.split(".", 1)[0], "account_host": host}
        if credential is not None:
            sas = "sig=" in credential
            options["sas_token" if sas else "account_key"] = (
                credential.lstrip("?") if sas else credential
            )
        fs = adlfs.AzureBlobFileSystem(**options, skip_instance_cache=True)
    root = container.strip("/")
    return FsspecStorage(fs, root, url=f"az://{root}", retry=retry)
