"""Notebooks, shells and TensorBoards with the official ``det`` CLI, through the master's proxy.

A real master listens on all addresses; a real root agent runs in a network namespace of its own
(:mod:`tests.netns`), so its tasks listen at that node's address and the master's proxy must
reach them there: nothing of a task is on this host's loopback. What users rely on:

- ``det notebook start --no-browser`` gives a notebook whose JupyterLab page and a kernel's
  WebSocket answer through ``/proxy/{id}/``; a user without access to the workspace gets 403;
- ``det shell start -- echo ok`` prints ``ok`` over the official tunnel;
- ``det tensorboard start EXP`` serves a TensorBoard whose runs name the experiment's trials;
- an idle notebook is stopped by its ``idle_timeout``.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from websockets.sync.client import connect

from stalwart.local import LocalCluster
from tests.compat.conftest import Det, MasterProcess, _start_master, _stop, describe, det_at
from tests.compat.test_det_workflows import UUID, WORKFLOWS, admin

__all__ = ["admin"]  # logged in as admin, on this module's master and agent
from tests.netns import Node, network_node, require_netns

pytestmark = pytest.mark.compat

AGENT_ID = "node-1"
WAIT_S = 120.0
MASTER_CONFIG = "cluster:\n  tick: 0.5\n"


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    """The agent's node: a network namespace with an address of its own."""
    require_netns()
    with network_node(1) as made:
        yield made


@pytest.fixture(scope="module")
def stalwart_master(
    tmp_path_factory: pytest.TempPathFactory, node: Node
) -> Iterator[MasterProcess]:
    """A master listening on every address (the node reaches it at its link's host end)."""
    workdir = tmp_path_factory.mktemp("master")
    (workdir / "master.yaml").write_text(MASTER_CONFIG)
    master = _start_master(workdir, ["--host", "0.0.0.0", "--config", str(workdir / "master.yaml")])
    try:
        yield master
    finally:
        _stop(master.process)


@pytest.fixture(scope="module")
def agent(stalwart_master: MasterProcess, node: Node) -> Iterator[LocalCluster]:
    """A root agent with two slots on the node."""
    port = urlparse(stalwart_master.url).port
    assert port is not None
    cluster = LocalCluster(home=stalwart_master.home, port=port)
    cluster.start_agent(
        AGENT_ID,
        slots=2,
        master_url=f"http://{node.host_address}:{port}",
        prefix=node.exec_prefix,
    )
    try:
        yield cluster
    finally:
        cluster.stop_agent(AGENT_ID)


def _token(cli: Det) -> str:
    stored = json.loads((cli.config_dir / "auth.json").read_text())
    entry = stored["masters"][cli.master.url]
    return str(entry["tokens"][entry["active_user"]])


def _get(cli: Det, path: str) -> dict[str, Any]:
    resp = httpx.get(
        f"{cli.master.url}{path}", headers={"Authorization": f"Bearer {_token(cli)}"}, timeout=30
    )
    resp.raise_for_status()
    body: dict[str, Any] = resp.json()
    return body


def _wait_state(cli: Det, kind: str, task_id: str, state: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = _get(cli, f"/api/v1/{kind}s/{task_id}")[kind]
        if found["state"] == f"STATE_{state}" or time.monotonic() > deadline:
            assert found["state"] == f"STATE_{state}", found
            return dict(found)
        time.sleep(0.5)


def test_the_agent_is_on_its_own_node(admin: Det, node: Node) -> None:
    agents = _get(admin, "/api/v1/agents")["agents"]
    assert [a["addresses"] for a in agents] == [[node.address]]


def test_a_notebook_answers_through_the_proxy(admin: Det, node: Node) -> None:
    done = admin.run("notebook", "start", "--no-browser", timeout=WAIT_S)
    assert done.returncode == 0, describe(done)
    assert "Jupyter Notebook is running at" in done.stdout, describe(done)
    found = UUID.search(done.stdout)
    assert found is not None, describe(done)
    notebook_id = found.group(0)
    try:
        notebook = _get(admin, f"/api/v1/notebooks/{notebook_id}")["notebook"]
        address = notebook["serviceAddress"]
        token = address.split("token=", 1)[1]
        base = f"{admin.master.url}/proxy/{notebook_id}"
        page = httpx.get(f"{admin.master.url}{address}", timeout=30, follow_redirects=True)
        assert page.status_code == 200, page.text
        assert "JupyterLab" in page.text
        auth = {"Authorization": f"token {token}"}
        kernel = httpx.post(f"{base}/api/kernels", headers=auth, json={}, timeout=60)
        assert kernel.status_code == 201, kernel.text
        ws_url = base.replace("http://", "ws://") + f"/api/kernels/{kernel.json()['id']}/channels"
        assert _execute(ws_url, token, "print(6 * 7)") == "42\n"
        # the task listens on its node: the proxy reached it at the node's address
        assert node.address not in ("127.0.0.1", "localhost")
    finally:
        admin.ok("notebook", "kill", notebook_id)
    _wait_state(admin, "notebook", notebook_id, "TERMINATED")


def _execute(ws_url: str, token: str, code: str) -> str:
    """Run ``code`` on a kernel through its WebSocket; what it printed."""
    msg_id = "stalwart-test-1"
    request = {
        "header": {
            "msg_id": msg_id,
            "username": "test",
            "session": "stalwart-test",
            "msg_type": "execute_request",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": {"code": code, "silent": False, "store_history": False},
        "channel": "shell",
        "buffers": [],
    }
    printed = ""
    with connect(f"{ws_url}?token={token}", open_timeout=30) as ws:
        ws.send(json.dumps(request))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = json.loads(ws.recv(timeout=60))
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "stream":
                printed += message["content"]["text"]
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                return printed
    raise AssertionError(f"the kernel did not finish running {code!r}; printed {printed!r}")


def test_an_outsider_gets_403_from_the_proxy(
    admin: Det, det_venv: Path, stalwart_master: MasterProcess, tmp_path: Path
) -> None:
    admin.ok("user", "create", "outsider", "--password", "Long-password-1")
    _private_workspace(stalwart_master, "private")
    notebook_id = admin.ok("notebook", "start", "-d", "-w", "private").stdout.strip()
    try:
        _wait_state(admin, "notebook", notebook_id, "RUNNING")
        outsider = det_at(det_venv, stalwart_master, tmp_path / "outsider")
        outsider.login("outsider", "Long-password-1")
        denied = httpx.get(
            f"{admin.master.url}/proxy/{notebook_id}/lab",
            headers={"Authorization": f"Bearer {_token(outsider)}"},
            timeout=30,
        )
        assert denied.status_code == 403, denied.text
        assert "has no access to task" in denied.json()["message"]
        anonymous = httpx.get(f"{admin.master.url}/proxy/{notebook_id}/lab", timeout=30)
        assert anonymous.status_code == 401, anonymous.text
        listed = json.loads(outsider.ok("notebook", "list", "--all", "--json").stdout)
        assert notebook_id not in {n["id"] for n in listed}
    finally:
        admin.ok("notebook", "kill", notebook_id)


def _private_workspace(master: MasterProcess, name: str) -> None:
    """A workspace where users without a role have none (written into the master's database
    directly, as a workspace whose creator holds no role there)."""
    with sqlite3.connect(master.home / "master.db") as db:
        db.execute(
            "INSERT INTO workspaces (name, archived, immutable, default_role) "
            "VALUES (?, 0, 0, 'none')",
            (name,),
        )


def test_a_shell_runs_a_command_over_the_tunnel(admin: Det) -> None:
    done = admin.run("shell", "start", "--", "echo", "ok", timeout=WAIT_S)
    assert done.returncode == 0, describe(done)
    assert "ok" in done.stdout.splitlines() or "ok\r" in done.stdout.splitlines(), describe(done)
    shells = json.loads(admin.ok("shell", "list", "--json").stdout)
    for shell in shells:
        admin.ok("shell", "kill", shell["id"])


def test_an_idle_notebook_is_stopped(admin: Det) -> None:
    notebook_id = admin.ok(
        "notebook",
        "start",
        "-d",
        "--config",
        "idle_timeout=3s",
        "--config",
        "environment.environment_variables=[STALWART_IDLE_REPORT_SECONDS=1]",
    ).stdout.strip()
    assert UUID.fullmatch(notebook_id)
    _wait_state(admin, "notebook", notebook_id, "TERMINATED")
    logs = admin.ok("task", "logs", notebook_id).stdout
    assert "idle_timeout" in logs, logs


def test_a_tensorboard_shows_the_experiments_trials(admin: Det, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(WORKFLOWS / "tb_trial.py", model / "tb_trial.py")
    config = tmp_path / "tb.yaml"
    config.write_text(
        "name: tensorboard-source\n"
        "entrypoint: python3 tb_trial.py\n"
        "searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n"
        "resources:\n  slots_per_trial: 0\n"
        "max_restarts: 0\n"
    )
    created = admin.ok("experiment", "create", str(config), str(model), "--follow-first-trial")
    found = re.search(r"Created experiment (\d+)", created.stdout)
    assert found is not None, describe(created)
    exp_id = int(found.group(1))
    trial_id = _get(admin, f"/api/v1/experiments/{exp_id}/trials")["trials"][0]["id"]
    done = admin.run("tensorboard", "start", str(exp_id), "--no-browser", timeout=WAIT_S)
    assert done.returncode == 0, describe(done)
    board = UUID.search(done.stdout)
    assert board is not None, describe(done)
    try:
        runs = httpx.get(
            f"{admin.master.url}/proxy/{board.group(0)}/data/runs",
            headers={"Authorization": f"Bearer {_token(admin)}"},
            timeout=30,
        )
        assert runs.status_code == 200, runs.text
        assert f"experiment_{exp_id}/trial_{trial_id}" in runs.json()
        listed = json.loads(admin.ok("tensorboard", "list", "--json").stdout)
        assert [t["experimentIds"] for t in listed if t["id"] == board.group(0)] == [[exp_id]]
    finally:
        admin.ok("tensorboard", "kill", board.group(0))
