"""Hostile or malformed input answers a 4xx JSON error saying what is wrong, at once, and never
a 500 or a hang (issue 20): YAML alias bombs, deep nesting, clashing or overlong model-definition
paths, log lines that are not text or are too long, and agent syncs with a bad token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.agent.protocol import AGENT_TOKEN_HEADER
from stalwart.master.app import create_app
from stalwart.master.db.tables import TaskLog
from tests.master.test_allocations_api import CONFIG, make_trial
from tests.model_def import entry
from tests.security.conftest import login, make_settings, state_of


def _create(
    client: TestClient,
    headers: dict[str, str],
    config: str = CONFIG,
    files: list[dict[str, Any]] | None = None,
) -> Any:
    return client.post(
        "/api/v1/experiments",
        json={
            "activate": False,
            "config": config,
            "modelDefinition": files if files is not None else [entry("train.py")],
        },
        headers=headers,
    )


def _refused(resp: Any, status: int, *words: str) -> str:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json"), resp.text
    message: str = resp.json()["message"]
    for word in words:
        assert word in message, message
    return message


def _billion_laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return CONFIG + "data:\n" + "".join(f"  {line}\n" for line in lines)


def test_a_yaml_alias_bomb_is_refused(client: TestClient, admin: dict[str, str]) -> None:
    _refused(_create(client, admin, _billion_laughs()), 400, "aliases", "expand", "reuse fewer")


def test_a_config_with_a_few_aliases_still_loads(client: TestClient, admin: dict[str, str]) -> None:
    config = CONFIG + (
        "data:\n"
        "  base: &base {path: /data, workers: 4, shuffle: true}\n"
        "  train: *base\n"
        "  valid: {<<: *base, shuffle: false}\n"
        "  sets: &sets [a, b, c]\n"
        "  again: *sets\n"
    )
    resp = _create(client, admin, config)
    assert resp.status_code == 200, resp.text
    data = resp.json()["config"]["data"]
    assert data["train"] == data["base"]
    assert data["valid"]["shuffle"] is False


@pytest.mark.parametrize(
    "nested",
    [
        "data: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "data: " + "{a: " * 100_000 + "1" + "}" * 100_000 + "\n",
        "data:\n" + "".join(" " * i + "k:\n" for i in range(1, 400)) + " " * 400 + "k: 1\n",
    ],
    ids=["lists", "flow-mappings", "block-mappings"],
)
def test_a_deeply_nested_config_is_refused(
    client: TestClient, admin: dict[str, str], nested: str
) -> None:
    _refused(_create(client, admin, CONFIG + nested), 400, "nested", "flatten")


def test_a_file_and_a_directory_of_the_same_name_are_refused(
    client: TestClient, admin: dict[str, str]
) -> None:
    for files in ([entry("x"), entry("x/y")], [entry("x/y"), entry("x")]):
        _refused(_create(client, admin, files=files), 400, "'x'", "model definition")


def test_an_overlong_file_name_is_refused(client: TestClient, admin: dict[str, str]) -> None:
    _refused(_create(client, admin, files=[entry("a" * 5000)]), 400, "model definition", "long")
    deep = "/".join(["d" * 200] * 30) + "/train.py"
    _refused(_create(client, admin, files=[entry(deep)]), 400, "model definition", "long")


def test_a_log_line_with_a_lone_surrogate_is_refused(
    client: TestClient, admin: dict[str, str]
) -> None:
    env = make_trial(client, state_of(client), admin)
    line = '{"taskId": "TASK", "log": "bad \\ud800 line\\n"}'.replace("TASK", env.task_id)
    body = '{"logs": [' + line + "]}"
    resp = client.post("/api/v1/task/logs", content=body, headers=env.headers)
    _refused(resp, 400, "logs[0]", "surrogate")
    resp = client.patch(  # the same anywhere else a string is stored
        f"/api/v1/experiments/{env.experiment_id}",
        content='{"description": "\\udfff"}',
        headers={**admin, "Content-Type": "application/merge-patch+json"},
    )
    assert resp.status_code < 500, resp.text


def _stored_lines(client: TestClient, task_id: str) -> list[str]:
    with state_of(client).sessions() as session:
        rows = session.scalars(select(TaskLog).where(TaskLog.task_id == task_id)).all()
        return [row.log for row in sorted(rows, key=lambda r: r.id)]


def test_an_overlong_log_line_is_cut_with_a_marker(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", limits={"max_log_line_bytes": 1000})
    with TestClient(create_app(settings, run_cluster=False)) as client:
        admin = login(client, "admin")
        env = make_trial(client, state_of(client), admin)
        lines = [
            {"taskId": env.task_id, "log": "ok\n"},
            {"taskId": env.task_id, "log": "x" * 5_000_000},
            {"taskId": env.task_id, "log": "é" * 500},  # 1000 bytes of UTF-8: kept whole
            {"taskId": env.task_id, "log": "é" * 501},  # cut between characters, never inside
        ]
        resp = client.post("/api/v1/task/logs", json={"logs": lines}, headers=env.headers)
        assert resp.status_code == 200, resp.text
        stored = _stored_lines(client, env.task_id)
        assert stored[0] == "ok\n"
        assert stored[1].startswith("x" * 1000 + "... [line truncated: 5000000 bytes")
        assert "limits.max_log_line_bytes" in stored[1]
        assert len(stored[1]) < 1200
        assert stored[2] == "é" * 500
        assert stored[3].startswith("é" * 500 + "... [line truncated: 1002 bytes")


def test_the_default_log_line_limit_is_one_mib(client: TestClient, admin: dict[str, str]) -> None:
    env = make_trial(client, state_of(client), admin)
    line = {"taskId": env.task_id, "log": "x" * (3 * 1024 * 1024)}
    resp = client.post("/api/v1/task/logs", json={"logs": [line]}, headers=env.headers)
    assert resp.status_code == 200, resp.text
    (stored,) = _stored_lines(client, env.task_id)
    assert stored.startswith("x" * 1024 * 1024 + "... [line truncated")


def test_an_agent_sync_checks_the_token_before_the_body(client: TestClient) -> None:
    for body in ("not json", '{"wait_seconds": "soon", "containers": 3}'):
        resp = client.post(
            "/api/v1/agents/a1/sync", content=body, headers={AGENT_TOKEN_HEADER: "wrong"}
        )
        _refused(resp, 401, "agent token")
        resp = client.post("/api/v1/agents/a1/sync", content=body)
        _refused(resp, 401, "agent token")
    token = state_of(client).agent_token
    resp = client.post(
        "/api/v1/agents/a1/sync", content="not json", headers={AGENT_TOKEN_HEADER: token}
    )
    _refused(resp, 400, "invalid")
