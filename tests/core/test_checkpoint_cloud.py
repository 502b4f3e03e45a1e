"""CheckpointContext on GCS and Azure Blob: a real master and real emulators
(gcp-storage-emulator, Azurite), as ``test_checkpoint_s3.py`` does on S3.

The experiment config holds only Determined's fields; the GCS emulator is found through
``STORAGE_EMULATOR_HOST``, as Google's SDKs find it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from stalwart.core import CheckpointNotFoundError
from stalwart.core._context import build_context
from tests.core.conftest import CONFIG, FAST_RETRY, MasterServer, new_trial, task_headers
from tests.storage.azure import AzureServer, running_azure_server
from tests.storage.gcs import GCSServer, running_gcs_server


@pytest.fixture(scope="module")
def gcs() -> Iterator[GCSServer]:
    with running_gcs_server() as server:
        yield server


@pytest.fixture(scope="module")
def azure() -> Iterator[AzureServer]:
    with running_azure_server() as server:
        yield server


@pytest.fixture(params=["gcs", "azure"])
def store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], Any, str]:
    """The ``checkpoint_storage`` config, a plain fsspec client on the emulator, and the
    client's path of the checkpoints' root."""
    if request.param == "gcs":
        gcs: GCSServer = request.getfixturevalue("gcs")
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.endpoint_url)
        bucket = gcs.new_bucket()
        return gcs.config(bucket), gcs.client(), f"{bucket}/ckpts"
    azure: AzureServer = request.getfixturevalue("azure")
    container = azure.new_container()
    return azure.config(container), azure.client(), container


def test_store_restore_delete(master: MasterServer, store: tuple[dict[str, Any], Any, str]) -> None:
    config, client, root = store
    lines = "".join(f"  {key}: {json.dumps(value)}\n" for key, value in config.items())
    env = new_trial(master, CONFIG + "checkpoint_storage:\n" + lines)
    with build_context(env, retry=FAST_RETRY) as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 4}) as (path, uuid):
            (path / "model.bin").write_bytes(b"12345")
            (path / "sub").mkdir()
            (path / "sub" / "opt.bin").write_bytes(b"1")
        with ctx.checkpoint.restore_path(uuid) as restored:
            assert (restored / "model.bin").read_bytes() == b"12345"
            assert (restored / "sub" / "opt.bin").read_bytes() == b"1"
        with ctx.checkpoint.restore_path(uuid, selector=lambda p: p == "model.bin") as part:
            assert sorted(p.name for p in part.iterdir()) == ["model.bin"]
        assert ctx.checkpoint.get_metadata(uuid) == {"steps_completed": 4}

        stored = client.cat(f"{root}/{uuid}/metadata.json")
        assert json.loads(stored) == {"steps_completed": 4}
        with master.client() as http:
            resp = http.get(f"/api/v1/checkpoints/{uuid}", headers=task_headers(env))
        assert resp.json()["checkpoint"]["resources"] == {
            "metadata.json": str(len(stored)),
            "model.bin": "5",
            "sub/": "0",
            "sub/opt.bin": "1",
        }

        ctx.checkpoint.delete(uuid, globs=["sub/*"])
        assert sorted(client.find(f"{root}/{uuid}")) == [
            f"{root}/{uuid}/metadata.json",
            f"{root}/{uuid}/model.bin",
        ]
        ctx.checkpoint.delete(uuid)
        with pytest.raises(CheckpointNotFoundError), ctx.checkpoint.restore_path(uuid):
            pass  # pragma: no cover - never entered
    assert client.find(f"{root}/{uuid}") == []
