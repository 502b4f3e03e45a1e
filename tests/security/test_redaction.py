"""Secrets never come back out: registry passwords, storage keys and tokens are masked in every
config and log line the API returns, while tasks still get the real values."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from stalwart.master.app import create_app
from stalwart.master.db.tables import Container, Experiment
from stalwart.master.redact import MASK, redact_config, redact_yaml
from tests.master.test_allocations_api import add_trial, create_experiment, task_headers
from tests.security.conftest import login, make_settings, state_of

SECRETS = {
    "registry": "reg-pass-4711",
    "registry_auth": "dXNlcjpyZWctcGFzcw==",
    "access": "AKIA-ACCESS-0815",
    "secret": "s3-secret-key-2342",
    "wandb": "wandb-api-key-1337",
}

CONFIG = f"""\
entrypoint: python3 train.py
hyperparameters:
  lr: 0.1
searcher:
  name: single
  metric: loss
environment:
  registry_auth:
    username: robot
    password: {SECRETS["registry"]}
    auth: {SECRETS["registry_auth"]}
  environment_variables:
    - WANDB_API_KEY={SECRETS["wandb"]}
    - PLAIN_SETTING=visible
checkpoint_storage:
  type: s3
  bucket: my-bucket
  access_key: {SECRETS["access"]}
  secret_key: {SECRETS["secret"]}
"""


def _assert_clean(text: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"the {name} secret leaked: {text[:300]}"


def test_experiment_answers_mask_every_secret(client: TestClient, admin: dict[str, str]) -> None:
    files = [{"path": "train.py", "type": 48, "content": "", "mode": 0o100644}]
    created = client.post(
        "/api/v1/experiments",
        json={"activate": True, "config": CONFIG, "modelDefinition": files},
        headers=admin,
    )
    assert created.status_code == 200, created.text
    _assert_clean(created.text)
    experiment_id = created.json()["experiment"]["id"]
    got = client.get(f"/api/v1/experiments/{experiment_id}", headers=admin)
    assert got.status_code == 200
    _assert_clean(got.text)
    body = got.json()
    assert body["config"]["checkpoint_storage"]["secret_key"] == MASK
    assert body["config"]["checkpoint_storage"]["bucket"] == "my-bucket"
    assert body["config"]["environment"]["registry_auth"]["username"] == "robot"
    assert MASK in body["experiment"]["originalConfig"]
    assert "PLAIN_SETTING=visible" in got.text
    listed = client.get("/api/v1/experiments", headers=admin)
    _assert_clean(listed.text)
    assert MASK in listed.text
    # the stored config keeps the real values: tasks are built from it
    with state_of(client).sessions() as session:
        stored = session.get(Experiment, experiment_id)
        assert stored is not None
        assert stored.config["checkpoint_storage"]["secret_key"] == SECRETS["secret"]
        assert SECRETS["registry"] in stored.original_config


def test_checkpoint_training_metadata_masks_the_config(
    client: TestClient, admin: dict[str, str]
) -> None:
    env = add_trial(state_of(client), create_experiment(client, admin, CONFIG))
    report = {
        "uuid": "ckpt-1",
        "state": "STATE_COMPLETED",
        "metadata": {"steps_completed": 1},
        "resources": {"a": "1"},
        "taskId": env.task_id,
        "allocationId": env.allocation_id,
    }
    resp = client.post("/api/v1/checkpoints", json=report, headers=task_headers(env.token))
    assert resp.status_code == 200, resp.text
    for path in (
        "/api/v1/checkpoints/ckpt-1",
        f"/api/v1/trials/{env.trial_id}/checkpoints",
        f"/api/v1/experiments/{env.experiment_id}/checkpoints",
    ):
        got = client.get(path, headers=admin)
        assert got.status_code == 200, got.text
        _assert_clean(got.text)
    # the task itself reads its checkpoint (metadata) and gets the same masked answer
    own = client.get("/api/v1/checkpoints/ckpt-1", headers=task_headers(env.token))
    assert own.status_code == 200
    _assert_clean(own.text)


def test_served_log_lines_mask_secrets_and_tokens(
    client: TestClient, admin: dict[str, str]
) -> None:
    env = add_trial(state_of(client), create_experiment(client, admin, CONFIG))
    with state_of(client).sessions() as session:  # the agent's spec holds the real token
        session.add(
            Container(
                allocation_id=env.allocation_id,
                rank=0,
                agent_id="a1",
                state="RUNNING",
                spec={"token": env.token, "env": {"DET_SESSION_TOKEN": env.token}},
            )
        )
        session.commit()
    lines = [
        f"AWS_SECRET_ACCESS_KEY={SECRETS['secret']}\n",
        f"WANDB_API_KEY={SECRETS['wandb']} DET_SESSION_TOKEN={env.token}\n",
        "an ordinary line\n",
    ]
    logs = [
        {
            "log": line,
            "task_id": env.task_id,
            "allocation_id": env.allocation_id,
            "timestamp": "2025-01-01T00:00:00Z",
            "source": "task",
        }
        for line in lines
    ]
    resp = client.post("/api/v1/task/logs", json={"logs": logs}, headers=task_headers(env.token))
    assert resp.status_code == 200, resp.text
    for path in (f"/api/v1/trials/{env.trial_id}/logs", f"/api/v1/tasks/{env.task_id}/logs"):
        got = client.get(path, headers=admin)
        assert got.status_code == 200
        _assert_clean(got.text)
        assert env.token not in got.text
        served = [json.loads(line)["result"]["log"] for line in got.text.splitlines()]
        assert f"AWS_SECRET_ACCESS_KEY={MASK}\n" in served
        assert "an ordinary line\n" in served


def test_master_config_masks_its_secrets(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path / "home",
        cluster={"agent_token": "agent-token-9999"},
        security={"initial_user_password": "Initial-Pass-1"},
    )
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin", "Initial-Pass-1")
        got = client.get("/api/v1/master/config", headers=admin)
        assert got.status_code == 200, got.text
        assert "agent-token-9999" not in got.text
        assert "Initial-Pass-1" not in got.text
        assert got.json()["config"]["cluster"]["agent_token"] == MASK


def test_redaction_rules() -> None:
    config: dict[str, Any] = {
        "checkpoint_storage": {
            "type": "azure",
            "connection_string": "DefaultEndpointsProtocol=x;AccountKey=y",
            "account_key": "k",
            "container": "c",
        },
        "environment": {
            "environment_variables": {"cpu": ["HF_TOKEN=t1", "A=1"], "cuda": ["DB_PASSWORD=p"]},
            "registry_auth": {"password": None},
        },
        "hyperparameters": {"token_budget": 5},
    }
    masked = redact_config(config)
    assert masked["checkpoint_storage"]["connection_string"] == MASK
    assert masked["checkpoint_storage"]["account_key"] == MASK
    assert masked["checkpoint_storage"]["container"] == "c"
    env = masked["environment"]["environment_variables"]
    assert env == {"cpu": [f"HF_TOKEN={MASK}", "A=1"], "cuda": [f"DB_PASSWORD={MASK}"]}
    assert masked["environment"]["registry_auth"]["password"] is None
    assert masked["hyperparameters"] == {"token_budget": 5}
    assert config["checkpoint_storage"]["account_key"] == "k"  # the input is untouched
    plain = "searcher:\n  name: single  # a comment\n"
    assert redact_yaml(plain) == plain
    _assert_clean(redact_yaml(CONFIG))


def test_redact_yaml_skips_parsing_only_where_no_secret_can_hide() -> None:
    plain = "name: x\nsearcher:\n  name: single\n  metric: loss\n"
    assert redact_yaml(plain) is plain  # nothing that could name a secret: returned as is
    spelled = 'checkpoint_storage:\n  type: s3\n  "secret\\x5fkey": hunter2\n'  # a YAML escape
    assert "hunter2" not in redact_yaml(spelled)
    assert MASK in redact_yaml(spelled)
    keyed = "checkpoint_storage:\n  type: s3\n  Secret-Key: hunter2\n"
    assert "hunter2" not in redact_yaml(keyed)


def test_the_model_definition_served_masks_the_config_file(
    client: TestClient, admin: dict[str, str]
) -> None:
    """The det CLI uploads the experiment's directory, config file included (issue 20)."""
    files = [
        {"path": "train.py", "type": 48, "content": base64.b64encode(b"print(1)\n").decode()},
        {"path": "const.yaml", "type": 48, "content": base64.b64encode(CONFIG.encode()).decode()},
    ]
    created = client.post(
        "/api/v1/experiments",
        json={"activate": False, "config": CONFIG, "modelDefinition": files},
        headers=admin,
    )
    assert created.status_code == 200, created.text
    experiment_id = created.json()["experiment"]["id"]
    resp = client.get(f"/api/v1/experiments/{experiment_id}/model_def", headers=admin)
    assert resp.status_code == 200, resp.text
    blob = base64.b64decode(resp.json()["b64Tgz"])
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        contents = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert contents["train.py"] == "print(1)\n"
    _assert_clean(contents["const.yaml"])
    assert f"password: {MASK}" in contents["const.yaml"]
    assert "bucket: my-bucket" in contents["const.yaml"]
    with state_of(client).sessions() as session:  # tasks get the files as uploaded
        stored = session.get(Experiment, experiment_id)
        assert stored is not None
        assert SECRETS["secret"].encode() in gzip.decompress(stored.model_definition or b"")
