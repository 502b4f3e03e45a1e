"""Creating experiments: the official client's request, validation errors, model definitions."""

from __future__ import annotations

import base64
import io
import tarfile
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stalwart.environments import load_manifest
from stalwart.errors import InvalidArgumentError, PayloadTooLargeError
from stalwart.master.services.model_def import build_archive, extract_archive

CONFIG = """\
# a comment the client sends verbatim
entrypoint: python3 train.py
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
"""


def file_entry(path: str, content: bytes = b"", kind: int = 48) -> dict[str, Any]:
    return {
        "path": path,
        "type": kind,
        "content": base64.b64encode(content).decode(),
        "mode": 0o100644 if kind == 48 else 0o40755,
        "mtime": "1700000000",
        "uid": 0,
        "gid": 0,
    }


def create(client: TestClient, headers: dict[str, str], **body: Any) -> Any:
    payload = {
        "activate": True,
        "config": CONFIG,
        "modelDefinition": [file_entry("train.py", b"import torch\n")],
        "parentId": None,
        "projectId": None,
        "template": None,
        "validateOnly": False,
    }
    payload.update(body)
    return client.post("/api/v1/experiments", json=payload, headers=headers)


def test_create_returns_the_required_keys_and_defaulted_config(
    client: TestClient, admin: dict[str, str]
) -> None:
    resp = create(client, admin)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    exp = body["experiment"]
    for key in (
        "id",
        "name",
        "state",
        "archived",
        "config",
        "jobId",
        "numTrials",
        "originalConfig",
        "projectId",
        "projectOwnerId",
        "searcherType",
        "startTime",
        "username",
    ):
        assert key in exp, key
    assert exp["state"] == "STATE_ACTIVE"
    assert exp["originalConfig"] == CONFIG
    assert exp["username"] == "admin"
    assert exp["name"].startswith("Experiment (")
    config = body["config"]
    assert config["max_restarts"] == 5
    assert config["checkpoint_storage"]["type"] == "shared_fs"
    assert isinstance(config["reproducibility"]["experiment_seed"], int)
    pytorch = load_manifest().default_image("pytorch", "cuda")[1]
    assert config["environment"]["image"]["cuda"] == pytorch


def test_paused_when_not_activated(client: TestClient, admin: dict[str, str]) -> None:
    assert create(client, admin, activate=False).json()["experiment"]["state"] == "STATE_PAUSED"


def test_invalid_config_is_400_with_every_problem(
    client: TestClient, admin: dict[str, str]
) -> None:
    resp = create(client, admin, config="searcher:\n  name: random\n  metric: loss\nnmae: x\n")
    assert resp.status_code == 400
    message = resp.json()["error"]["error"]
    assert message.startswith("invalid experiment configuration: ")
    assert "max_trials" in message
    assert "did you mean 'name'" in message


def test_tensorflow_model_gets_the_tensorflow_image(
    client: TestClient, admin: dict[str, str]
) -> None:
    resp = create(client, admin, modelDefinition=[file_entry("train.py", b"import tensorflow\n")])
    assert resp.status_code == 200, resp.text
    tf = load_manifest().default_image("tensorflow", "cuda")[1]
    assert resp.json()["config"]["environment"]["image"]["cuda"] == tf


def test_model_importing_both_frameworks_is_refused_with_the_fix(
    client: TestClient, admin: dict[str, str]
) -> None:
    files = [file_entry("a.py", b"import torch\n"), file_entry("b.py", b"import keras\n")]
    resp = create(client, admin, modelDefinition=files)
    assert resp.status_code == 400
    assert "framework" in resp.json()["error"]["error"]


def test_path_traversal_is_refused(client: TestClient, admin: dict[str, str]) -> None:
    resp = create(client, admin, modelDefinition=[file_entry("../evil.py", b"x")])
    assert resp.status_code == 400
    assert "outside the context" in resp.json()["error"]["error"]


def test_validate_only_stores_nothing(client: TestClient, admin: dict[str, str]) -> None:
    resp = create(client, admin, validateOnly=True)
    assert resp.status_code == 200
    assert resp.json()["experiment"]["id"] == 0


def test_unknown_project_is_404(client: TestClient, admin: dict[str, str]) -> None:
    assert create(client, admin, projectId=999).status_code == 404


def test_needs_credentials(client: TestClient) -> None:
    assert create(client, {}).status_code == 401


def test_archive_round_trip(tmp_path: Any) -> None:
    blob = build_archive(
        [file_entry("pkg", kind=53), file_entry("pkg/mod.py", b"x = 1\n")], max_bytes=100
    )
    written = extract_archive(blob, tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["pkg/mod.py"]
    assert (tmp_path / "pkg/mod.py").read_bytes() == b"x = 1\n"


@pytest.mark.parametrize("path", ["/etc/passwd", "a/../../b", "..", "a\\b"])
def test_unsafe_paths(path: str) -> None:
    with pytest.raises(InvalidArgumentError):
        build_archive([file_entry(path, b"x")], max_bytes=100)


@pytest.mark.parametrize("field", ["type", "mode", "mtime"])
@pytest.mark.parametrize("value", ["soon", [], {}, 1e400, True])
def test_a_non_numeric_field_is_refused_naming_the_file(field: str, value: object) -> None:
    entry = {**file_entry("train.py", b"x"), field: value}
    with pytest.raises(InvalidArgumentError, match=f"'train.py' {field} is not a number"):
        build_archive([entry], max_bytes=100)


def test_links_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="links are not allowed"):
        build_archive([file_entry("link", b"/etc/passwd", kind=50)], max_bytes=100)


def test_size_limit() -> None:
    with pytest.raises(PayloadTooLargeError, match=r"\.detignore"):
        build_archive([file_entry("big", b"x" * 101)], max_bytes=100)


def test_extract_refuses_escaping_archives(tmp_path: Any) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(InvalidArgumentError):
        extract_archive(buffer.getvalue(), tmp_path / "dest")
    assert not (tmp_path / "escape.txt").exists()
