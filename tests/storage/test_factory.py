"""Opening storages from configs and URLs; retries of a flaky file system; S3 failures."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem  # type: ignore[import-untyped]

from stalwart.errors import ConfigError
from stalwart.storage import (
    CheckpointNotFoundError,
    DirectoryStorage,
    FsspecStorage,
    MissingExtraError,
    RetrySettings,
    StorageError,
    StorageUnavailableError,
    config_from_url,
    storage_from_config,
)
from tests.storage.azure import ACCOUNT, KEY, AzureServer
from tests.storage.gcs import GCSServer
from tests.storage.s3 import FAST, S3Server


def test_config_from_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert config_from_url("ckpts") == {"type": "shared_fs", "host_path": str(tmp_path / "ckpts")}
    assert config_from_url(tmp_path) == {"type": "shared_fs", "host_path": str(tmp_path)}
    assert config_from_url(f"file://{tmp_path}/x") == {
        "type": "shared_fs",
        "host_path": str(tmp_path / "x"),
    }
    assert config_from_url("s3://bucket") == {"type": "s3", "bucket": "bucket"}
    assert config_from_url("s3://bucket/a/b/") == {
        "type": "s3",
        "bucket": "bucket",
        "prefix": "a/b",
    }
    assert config_from_url("gs://bucket/p")["type"] == "gcs"
    assert config_from_url("gcs://bucket/p")["type"] == "gcs"
    with pytest.raises(ValueError, match="use s3://, gs://"):
        config_from_url("az://container/x")
    with pytest.raises(ValueError, match="has no bucket"):
        config_from_url("s3:///x")


def test_shared_fs_and_directory(tmp_path: Path) -> None:
    shared = storage_from_config(
        {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "ckpts"}
    )
    assert isinstance(shared, DirectoryStorage)
    assert shared.base == tmp_path / "ckpts"
    absolute = storage_from_config(
        {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": str(tmp_path / "abs")}
    )
    assert isinstance(absolute, DirectoryStorage)
    assert absolute.base == tmp_path / "abs"
    directory = storage_from_config({"type": "directory", "container_path": str(tmp_path)})
    assert isinstance(directory, DirectoryStorage)
    assert directory.path_of("ck") == tmp_path / "ck"
    with pytest.raises(ConfigError, match="container_path"):
        storage_from_config({"type": "directory"})
    with pytest.raises(ConfigError, match="checkpoint_storage"):
        storage_from_config({"type": "hdfs", "hdfs_url": "x"})


@pytest.mark.parametrize(
    ("config", "package"),
    [
        ({"type": "gcs", "bucket": "b"}, "gcsfs"),
        ({"type": "azure", "container": "c", "connection_string": "x"}, "adlfs"),
    ],
)
def test_missing_extras_say_what_to_install(
    config: dict[str, Any], package: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # `import package` raises ImportError
    with pytest.raises(MissingExtraError, match=rf"needs the {package} package") as info:
        storage_from_config(config)
    assert info.value.extra == config["type"]


class FlakyFileSystem(LocalFileSystem):  # type: ignore[misc]
    """The real local file system, whose first ``failures`` uploads drop the connection."""

    def __init__(self, failures: int, **kwargs: Any) -> None:
        super().__init__(auto_mkdir=True, skip_instance_cache=True, **kwargs)
        self.failures = failures
        self.calls = 0

    def put_file(self, path1: str, path2: str, callback: Any = None, **kwargs: Any) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionResetError("connection reset by peer")
        super().put_file(path1, path2, callback=callback, **kwargs)


def test_transient_failures_are_retried(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_text("a")
    store = FsspecStorage(FlakyFileSystem(2), str(tmp_path / "store"), retry=FAST)
    assert store.upload(tmp_path / "src", "ck") == {"a": 1}
    assert "uploading a in" in caplog.text
    assert "retrying in" in caplog.text

    flaky = FsspecStorage(FlakyFileSystem(5), str(tmp_path / "store2"), retry=FAST)
    with pytest.raises(StorageUnavailableError, match="failed after 3 attempts") as info:
        flaky.upload(tmp_path / "src", "ck")
    assert info.value.retryable
    with pytest.raises(CheckpointNotFoundError):
        flaky.list_resources("ck")


def test_s3_from_config(s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    store = storage_from_config(s3_server.config(bucket, "a/b"))
    assert repr(store) == f"FsspecStorage('s3://{bucket}/a/b')"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "w.bin").write_bytes(b"w")
    store.upload(tmp_path / "src", "ck")
    assert s3_server.client().cat(f"{bucket}/a/b/ck/w.bin") == b"w"


def test_s3_missing_bucket_is_not_retryable(s3_server: S3Server, tmp_path: Path) -> None:
    store = s3_server.storage("no-such-bucket")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "w.bin").write_bytes(b"w")
    with pytest.raises(StorageError) as info:
        store.upload(tmp_path / "src", "ck")
    assert not info.value.retryable


def test_s3_unreachable_is_retryable() -> None:
    s3fs = pytest.importorskip("s3fs")
    fs = s3fs.S3FileSystem(
        key="k",
        secret="s",
        endpoint_url="http://127.0.0.1:9",  # nothing listens there
        skip_instance_cache=True,
        config_kwargs={"retries": {"max_attempts": 1}},  # botocore's own retries take seconds
    )
    fs.retries = 1  # and so do s3fs's
    store = FsspecStorage(fs, "b", retry=RetrySettings(attempts=2, initial_backoff_s=0.01))
    with pytest.raises(StorageUnavailableError, match="failed after 2 attempts") as info:
        store.list_resources("ck")
    assert info.value.retryable


def test_unsafe_object_names_are_refused(s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    s3_server.client().pipe(f"{bucket}/ckpts/ck/../../evil", b"x")
    s3_server.client().pipe(f"{bucket}/ckpts/ck2/ok", b"x")
    store = s3_server.storage(bucket)
    listed = store.list_resources("ck2")
    assert listed == {"ok": 1}
    assert any("/../" in key for key in s3_server.client().find(f"{bucket}/ckpts/ck"))
    with pytest.raises(StorageError, match="unsafe"):
        store.download("ck", tmp_path / "dst")
    assert not (tmp_path / "evil").exists()


def upload_one_file(store: Any, tmp_path: Path) -> dict[str, int]:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "w.bin").write_bytes(b"w")
    uploaded: dict[str, int] = store.upload(tmp_path / "src", "ck")
    return uploaded


def test_gcs_from_config_reaches_the_emulator_of_storage_emulator_host(
    gcs_server: GCSServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = gcs_server.new_bucket()
    # host:port, as Google's SDKs take it (http:// is implied)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.endpoint_url.removeprefix("http://"))
    store = storage_from_config(gcs_server.config(bucket, "a/b"))
    assert repr(store) == f"FsspecStorage('gs://{bucket}/a/b')"
    assert upload_one_file(store, tmp_path) == {"w.bin": 1}
    assert gcs_server.client().cat(f"{bucket}/a/b/ck/w.bin") == b"w"


def test_gcs_missing_bucket_is_not_retryable(gcs_server: GCSServer, tmp_path: Path) -> None:
    with pytest.raises(StorageError) as info:
        upload_one_file(gcs_server.storage("no-such-bucket"), tmp_path)
    assert not info.value.retryable


def test_azure_from_config(azure_server: AzureServer, tmp_path: Path) -> None:
    container = azure_server.new_container()
    store = storage_from_config(azure_server.config(container))
    assert repr(store) == f"FsspecStorage('az://{container}')"
    assert upload_one_file(store, tmp_path) == {"w.bin": 1}
    assert azure_server.client().cat(f"{container}/ck/w.bin") == b"w"


def test_azure_account_url_with_a_key_or_a_sas(azure_server: AzureServer, tmp_path: Path) -> None:
    from azure.storage.blob import (
        AccountSasPermissions,
        ResourceTypes,
        generate_account_sas,
    )

    container = azure_server.new_container()
    url = azure_server.blob_endpoint  # path-style, plain http: http://127.0.0.1:<port>/<account>
    with_key = storage_from_config(
        {"type": "azure", "container": container, "account_url": url, "credential": KEY}
    )
    assert upload_one_file(with_key, tmp_path) == {"w.bin": 1}
    sas = generate_account_sas(
        ACCOUNT,
        KEY,
        resource_types=ResourceTypes(container=True, object=True),
        permission=AccountSasPermissions(read=True, list=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    with_sas = storage_from_config(
        {"type": "azure", "container": container, "account_url": url, "credential": sas}
    )
    assert with_sas.list_resources("ck") == {"w.bin": 1}
    in_url = storage_from_config(
        {"type": "azure", "container": container, "account_url": f"{url}?{sas}"}
    )
    assert in_url.list_resources("ck") == {"w.bin": 1}
    with pytest.raises(ValueError, match="plain http: give an account key or a SAS"):
        storage_from_config({"type": "azure", "container": container, "account_url": url})


def test_azure_https_account_urls_keep_their_host_and_port() -> None:
    with_key = storage_from_config(
        {
            "type": "azure",
            "container": "c",
            "account_url": "https://acct.blob.example.net:8443/",
            "credential": KEY,
        }
    )
    assert isinstance(with_key, FsspecStorage)
    client = with_key.fs.service_client  # made when the storage is opened; no request yet
    assert (client.account_name, client.url) == ("acct", "https://acct.blob.example.net:8443/")
    ambient = storage_from_config(  # Azure's default credential chain (asked nothing yet)
        {"type": "azure", "container": "c", "account_url": "https://acct.blob.core.windows.net"}
    )
    assert isinstance(ambient, FsspecStorage)
    assert ambient.fs.service_client.url == "https://acct.blob.core.windows.net/"
    with pytest.raises(ValueError, match="not an http"):
        storage_from_config({"type": "azure", "container": "c", "account_url": "acct"})


def test_azure_missing_container_is_not_retryable(
    azure_server: AzureServer, tmp_path: Path
) -> None:
    with pytest.raises(StorageError) as info:
        upload_one_file(azure_server.storage("no-such-container"), tmp_path)
    assert not info.value.retryable
