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
- Emulators: S3-compatible servers through ``endpoint_url``; a GCS emulator through
  ``STORAGE_EMULATOR_HOST`` (the variable Google's SDKs read; ``emulator_host`` in Python),
  reached anonymously over the JSON API; Azurite through a connection string or an ``http://``
  ``account_url`` with an account key or SAS.
"""

from __future__ import annotations

import importlib
import os
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


def _gcs_emulator_host() -> str | None:
    """The GCS emulator named by ``STORAGE_EMULATOR_HOST`` as a URL (``http://`` when it has no
    scheme), or None when it is unset, empty or ``default`` (as gcsfs reads it)."""
    host = os.environ.get("STORAGE_EMULATOR_HOST", "").strip()
    if host in ("", "default"):
        return None
    return host if host.startswith(("http://", "https://")) else f"http://{host}"


def gcs_storage(
    bucket: str,
    prefix: str | None = None,
    *,
    emulator_host: str | None = None,
    retry: RetrySettings | None = None,
) -> FsspecStorage:
    """Checkpoints in ``gs://bucket/prefix``, with credentials from the environment.

    With an emulator (``emulator_host``, else ``STORAGE_EMULATOR_HOST``) the requests go there
    without credentials (as Google's SDKs do), through gcsfs's plain JSON-API file system: its
    default one first asks the gRPC Storage Control API for the bucket's layout, which
    emulators do not serve (gcsfs then waits out a minute of retries on every call).
    """
    gcsfs = _require("gcs", "gcsfs", "gcs")
    endpoint = emulator_host or _gcs_emulator_host()
    if endpoint is not None:
        core = importlib.import_module("gcsfs.core")  # gcsfs itself is imported: never missing
        fs = core.GCSFileSystem(endpoint_url=endpoint, token="anon", skip_instance_cache=True)
    else:
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
    ``account_url`` with ``credential`` (a SAS token or an account key; unset: Azure's default
    credential chain, or a SAS in the URL's query).

    ``account_url`` is ``https://<account>.blob.core.windows.net`` (another host or a port is
    kept), or path-style ``http(s)://host:port/<account>`` as emulators serve it; an ``http://``
    one (Azurite) needs an account key or SAS."""
    adlfs = _require("azure", "adlfs", "azure")
    if connection_string is not None:
        fs = adlfs.AzureBlobFileSystem(
            connection_string=connection_string, skip_instance_cache=True
        )
    else:
        fs = adlfs.AzureBlobFileSystem(
            **_azure_account_options(account_url or "", credential), skip_instance_cache=True
        )
    root = container.strip("/")
    return FsspecStorage(fs, root, url=f"az://{root}", retry=retry)


def _azure_account_options(account_url: str, credential: str | None) -> dict[str, str]:
    """adlfs options for ``account_url`` and ``credential`` (see :func:`azure_storage`).

    With a key or a SAS they become a connection string whose ``BlobEndpoint`` is the URL as
    given: adlfs would rebuild the URL as ``https://<account_host>`` and the SDK would look for
    the account name of a bare key in a ``*.blob.core.*`` host name."""
    parsed = urlparse(account_url)
    if not parsed.hostname or parsed.scheme not in ("http", "https"):
        raise ValueError(f"azure account_url {account_url!r} is not an http(s) URL with a host")
    path = parsed.path.strip("/")
    account = path.split("/", 1)[0] if path else parsed.hostname.split(".", 1)[0]
    endpoint = f"{parsed.scheme}://{parsed.netloc}" + (f"/{path}" if path else "")
    if credential is None and "sig=" in parsed.query:
        credential = parsed.query  # a SAS in the URL
    if credential is not None:
        secret = (
            f"SharedAccessSignature={credential.lstrip('?')}"
            if "sig=" in credential
            else f"AccountKey={credential}"
        )
        return {
            "connection_string": (
                f"DefaultEndpointsProtocol={parsed.scheme};AccountName={account};{secret};"
                f"BlobEndpoint={endpoint};"
            )
        }
    if parsed.scheme != "https":
        raise ValueError(
            f"azure account_url {account_url!r} is plain http: give an account key or a SAS "
            "token as credential (or use connection_string)"
        )
    # Azure's default credential chain, over https://<account_host>
    return {"account_name": account, "account_host": endpoint.removeprefix("https://")}
