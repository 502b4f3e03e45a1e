"""``checkpoint_storage``: where checkpoints go, a union discriminated by ``type``.

Contract:

- The variants and their fields are Determined 0.38's: ``shared_fs``, ``directory``, ``s3``,
  ``gcs`` and ``azure`` (``hdfs`` is gone from Determined and is refused here too). An unknown
  ``type`` fails with a message that lists the allowed ones.
- Validation runs on the merged config (experiment, template and the master's
  ``checkpoint_storage``), so the fields Determined only requires "eventually" (the S3/GCS
  bucket, the Azure container, the directory path) are required here.
- The ``save_*`` retention counts are on every variant with Determined's defaults.
- Nothing here opens storage; :mod:`stalwart.storage` does, from these models.
"""

from __future__ import annotations

import os.path
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from stalwart.config.base import ConfigModel

__all__ = [
    "STORAGE_TYPES",
    "AzureStorage",
    "CheckpointStorageConfig",
    "DirectoryStorage",
    "GCSStorage",
    "S3Storage",
    "SharedFSStorage",
]

STORAGE_TYPES = ("shared_fs", "directory", "s3", "gcs", "azure")
"""The allowed values of ``checkpoint_storage.type``."""


def _check_prefix(prefix: str | None) -> str | None:
    """Determined's rule: an object-store prefix may not climb out with ``..``."""
    if prefix is not None and (
        prefix == ".." or prefix.startswith("../") or prefix.endswith("/..") or "/../" in prefix
    ):
        raise PydanticCustomError("storage_prefix", "'prefix' must not contain /../")
    return prefix


class _Storage(ConfigModel):
    """Retention counts shared by every storage type."""

    save_experiment_best: int = Field(
        default=0,
        ge=0,
        description="Keep the checkpoints of this many best trials of the experiment, by the "
        "searcher metric (plus what the other `save_*` keep).",
    )
    save_trial_best: int = Field(
        default=1, ge=0, description="Keep this many best checkpoints of every trial."
    )
    save_trial_latest: int = Field(
        default=1, ge=0, description="Keep this many most recent checkpoints of every trial."
    )


class SharedFSStorage(_Storage):
    """Checkpoints on a file system mounted at the same path on every node (NFS, Lustre...)."""

    type: Literal["shared_fs"] = Field(description="Always `shared_fs`.")
    host_path: str = Field(description="The shared directory on the hosts.")
    storage_path: str | None = Field(
        default=None,
        description="Subdirectory for checkpoints: relative to `host_path`, or an absolute path "
        "inside it. Unset: `host_path` itself.",
    )
    propagation: str = Field(
        default="rprivate",
        description="Mount propagation of the bind mount (`rprivate`, `rshared`, ...); "
        "meaningful only where tasks run in containers.",
    )
    container_path: str | None = Field(
        default=None,
        description="Where `host_path` is mounted inside the task container; unset uses a fixed "
        "path chosen by Stalwart. Ignored where tasks run without a container.",
    )
    checkpoint_path: str | None = Field(
        default=None,
        description="Legacy (replaced by `storage_path` long ago); accepted and ignored.",
    )
    tensorboard_path: str | None = Field(
        default=None,
        description="Legacy (replaced by `storage_path` long ago); accepted and ignored.",
    )

    @model_validator(mode="after")
    def _storage_path_inside_host_path(self) -> Self:
        # Determined's rule, kept exactly (including its plain string-prefix test).
        if self.storage_path is None:
            return self
        a = os.path.normpath(self.storage_path)
        b = os.path.normpath(self.host_path)
        inside = a.startswith(b) if os.path.isabs(a) else not a.startswith("..")
        if not inside:
            raise PydanticCustomError(
                "storage_path_outside",
                "storage_path must either be a relative directory or a subdirectory of host_path",
            )
        return self


class DirectoryStorage(_Storage):
    """Checkpoints in a directory that already exists inside every task's environment."""

    type: Literal["directory"] = Field(description="Always `directory`.")
    container_path: str = Field(
        description="The directory, as seen by the task (e.g. a volume mounted by `pod_spec` "
        "or a path every node has)."
    )


class S3Storage(_Storage):
    """Checkpoints in an S3 bucket (or any S3-compatible store via ``endpoint_url``)."""

    type: Literal["s3"] = Field(description="Always `s3`.")
    bucket: str = Field(description="The bucket name.")
    prefix: str | None = Field(
        default=None, description="Key prefix under which checkpoints are stored."
    )
    access_key: str | None = Field(
        default=None,
        description="Access key ID; unset uses the environment's credentials (IAM role, "
        "`AWS_*` variables, config files).",
    )
    secret_key: str | None = Field(
        default=None, description="Secret access key; unset uses the environment's credentials."
    )
    endpoint_url: str | None = Field(
        default=None, description="Endpoint of an S3-compatible store (MinIO, Ceph...)."
    )

    _prefix = field_validator("prefix")(_check_prefix)


class GCSStorage(_Storage):
    """Checkpoints in a Google Cloud Storage bucket (credentials from the environment)."""

    type: Literal["gcs"] = Field(description="Always `gcs`.")
    bucket: str = Field(description="The bucket name.")
    prefix: str | None = Field(
        default=None, description="Object prefix under which checkpoints are stored."
    )

    _prefix = field_validator("prefix")(_check_prefix)


class AzureStorage(_Storage):
    """Checkpoints in an Azure Blob Storage container.

    Exactly one of ``connection_string`` and ``account_url`` is set; ``credential`` goes only
    with ``account_url``.
    """

    type: Literal["azure"] = Field(description="Always `azure`.")
    container: str = Field(description="The blob container name.")
    connection_string: str | None = Field(
        default=None, description="A storage account connection string."
    )
    account_url: str | None = Field(
        default=None, description="The storage account URL (with `credential`, or ambient auth)."
    )
    credential: str | None = Field(
        default=None, description="A SAS token or account key to use with `account_url`."
    )

    @model_validator(mode="after")
    def _one_way_to_connect(self) -> Self:
        if self.connection_string is not None and self.credential is not None:
            raise PydanticCustomError(
                "azure_credential", "credential and connection_string must not both be set"
            )
        if (self.connection_string is None) == (self.account_url is None):
            raise PydanticCustomError(
                "azure_connection",
                "exactly one of connection_string or account_url must be set",
            )
        return self


CheckpointStorageConfig = Annotated[
    SharedFSStorage | DirectoryStorage | S3Storage | GCSStorage | AzureStorage,
    Field(discriminator="type"),
]
"""Checkpoint storage, discriminated by ``type`` (one of :data:`STORAGE_TYPES`)."""
