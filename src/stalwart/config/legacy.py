"""Sections Determined 0.38 still accepts but no longer acts on: ``security`` and ``data_layer``.

Contract: an old config that carries them still validates, with Determined's shapes and
defaults, and nothing reads them. ``security.kerberos`` has been unused in Determined for years;
``data_layer`` configured the long-removed YogaDL data layer.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from stalwart.config.base import ConfigModel

__all__ = [
    "DataLayerConfig",
    "GCSDataLayer",
    "KerberosConfig",
    "S3DataLayer",
    "SecurityConfig",
    "SharedFSDataLayer",
]


class KerberosConfig(ConfigModel):
    """Legacy Kerberos settings; accepted and ignored."""

    config_file: str = Field(description="Path to a krb5.conf; accepted and ignored.")


class SecurityConfig(ConfigModel):
    """Legacy security settings; accepted and ignored."""

    kerberos: KerberosConfig | None = Field(
        default=None, description="Legacy Kerberos settings; accepted and ignored."
    )


def _absolute(value: str | None, name: str) -> None:
    if value is not None and not value.startswith("/"):
        raise PydanticCustomError(
            "data_layer_path", "{name} must be an absolute path", {"name": name}
        )


class SharedFSDataLayer(ConfigModel):
    """Legacy data layer on a shared file system; accepted and ignored."""

    type: Literal["shared_fs"] = Field(description="Always `shared_fs`.")
    host_storage_path: str | None = Field(
        default=None, description="Absolute host path; accepted and ignored."
    )
    container_storage_path: str | None = Field(
        default=None, description="Absolute container path; accepted and ignored."
    )

    @model_validator(mode="after")
    def _absolute_paths(self) -> Self:
        _absolute(self.host_storage_path, "host_storage_path")
        _absolute(self.container_storage_path, "container_storage_path")
        return self


class _CachedDataLayer(ConfigModel):
    """Fields of the object-store data layers."""

    bucket: str = Field(description="Bucket; accepted and ignored.")
    bucket_directory_path: str = Field(description="Path in the bucket; accepted and ignored.")
    local_cache_host_path: str | None = Field(
        default=None, description="Absolute host cache path; accepted and ignored."
    )
    local_cache_container_path: str | None = Field(
        default=None, description="Absolute container cache path; accepted and ignored."
    )

    @model_validator(mode="after")
    def _cache_paths(self) -> Self:
        _absolute(self.local_cache_host_path, "local_cache_host_path")
        _absolute(self.local_cache_container_path, "local_cache_container_path")
        if (self.local_cache_host_path is None) != (self.local_cache_container_path is None):
            raise PydanticCustomError(
                "data_layer_cache",
                "local_cache_host_path and local_cache_container_path must be set together",
            )
        return self


class S3DataLayer(_CachedDataLayer):
    """Legacy data layer on S3; accepted and ignored."""

    type: Literal["s3"] = Field(description="Always `s3`.")
    access_key: str | None = Field(default=None, description="Accepted and ignored.")
    secret_key: str | None = Field(default=None, description="Accepted and ignored.")
    endpoint_url: str | None = Field(default=None, description="Accepted and ignored.")


class GCSDataLayer(_CachedDataLayer):
    """Legacy data layer on GCS; accepted and ignored."""

    type: Literal["gcs"] = Field(description="Always `gcs`.")


DataLayerConfig = Annotated[
    SharedFSDataLayer | S3DataLayer | GCSDataLayer, Field(discriminator="type")
]
"""Legacy ``data_layer`` (Determined's default: ``{type: shared_fs}``); accepted and ignored."""
