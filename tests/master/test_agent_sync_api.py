"""``POST /api/v1/agents/{id}/sync`` over HTTP: the agent token, and long-polls that never
outlast the agent timeout (a held sync is no heartbeat). Enrollment and the agents' own tokens:
``tests/security/test_agent_tokens.py``."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from stalwart.agent.protocol import AGENT_TOKEN_HEADER
from stalwart.master.api.errors import CLIENT_CLOSED_REQUEST
from stalwart.master.app import create_app
from stalwart.master.db.tables import MetricReport, TaskLog
from tests.agent.conftest import serve, wait_for
from tests.master.conftest import enroll, make_settings

BODY = {"slots": [{"id": "0", "device_type": "cpu"}], "containers": [], "wait_seconds": 30}


def test_a_quiet_agent_is_answered_well_within_the_agent_timeout(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home", cluster={"agent_timeout": 1.5})
    with TestClient(create_app(settings, run_cluster=False)) as client:
        headers = enroll(client, "n1", client.app.state.master.agent_token)  # type: ignore[attr-defined]
        client.post("/api/v1/agents/n1/sync", json=BODY, headers=headers)
        started = time.monotonic()
        answer = client.post("/api/v1/agents/n1/sync", json=BODY, headers=headers)
        held = time.monotonic() - started
    assert answer.status_code == 200
    assert answer.json()["start"] == []
    assert held < 1.5  # asked to wait 30 s; answered within a third of the timeout (+ slack)


def test_a_wrong_agent_token_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with TestClient(create_app(make_settings(tmp_path / "home"), run_cluster=False)) as client:
        answer = client.post(
            "/api/v1/agents/n1/sync", json=BODY, headers={AGENT_TOKEN_HEADER: "nope"}
        )
    assert answer.status_code == 401
    assert "agent_token" in answer.json()["message"]


Sync = Callable[[list[dict[str, object]], float], dict[str, Any]]
"""Agent ``n1``'s sync: its containers and how long it may wait -> the master's answer."""


def agent_and_experiment(client: TestClient, config: str) -> tuple[Sync, dict[str, str], int]:
    """Agent ``n1`` enrolled and registered, then an experiment of ``config`` created and
    activated: its sync, the admin's headers and the experiment id."""
    headers = enroll(client, "n1", client.app.state.master.agent_token)  # type: ignore[attr-defined]

    def sync(containers: list[dict[str, object]], wait: float) -> dict[str, Any]:
        body = {**BODY, "containers": containers, "wait_seconds": wait}
        answer = client.post("/api/v1/agents/n1/sync", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    sync([], 0)  # registered
    login = client.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
    auth = {"Authorization": f"Bearer {login.json()['token']}"}
    created = client.post(
        "/api/v1/experiments",
        json={"config": config, "activate": True, "modelDefinition": []},
        headers=auth,
    )
    assert created.status_code == 200, created.text
    return sync, auth, int(created.json()["experiment"]["id"])


def test_an_exit_is_answered_with_the_start_of_what_takes_the_freed_slot(tmp_path: Path) -> None:
    """One exchange per slot handover: the sync that reports an exit is held until the cluster
    loop's round on it, so its answer already starts the next trial."""
    config = (
        "name: handover\nentrypoint: sleep 1\nmax_restarts: 0\n"
        "hyperparameters:\n  x:\n    type: double\n    minval: 0\n    maxval: 1\n"
        "searcher:\n  name: random\n  metric: loss\n  max_trials: 2\n"
        "  max_concurrent_trials: 1\n"
    )
    settings = make_settings(tmp_path / "home")
    with TestClient(create_app(settings)) as client:
        sync, _, _ = agent_and_experiment(client, config)
        (first,) = sync([], 10)["start"]  # a long-poll woken by the placement
        running = {"allocation_id": first["allocation_id"], "rank": 0, "state": "RUNNING"}
        assert sync([running], 0)["start"] == []
        started = time.monotonic()
        answer = sync([{**running, "state": "EXITED", "exit_code": 0}], 10)
        held = time.monotonic() - started
    assert answer["forget"] == [f"{first['allocation_id']}/0"]
    (second,) = answer["start"]
    assert second["task_id"] != first["task_id"]
    assert held < 5  # answered after one round, not at the end of the long-poll


def test_reports_sent_with_an_exit_are_stored_with_it_once(tmp_path: Path) -> None:
    """What a task's harness handed to the agent when it closed comes with the exit: the
    master stores it before the exit (the round that ends the trial sees it), each report once
    however many ways it came, and only the task's own trial and run's (with a line in the
    task's log for the others)."""
    config = (
        "name: reports\nentrypoint: sleep 1\nmax_restarts: 0\n"
        "hyperparameters:\n  x: 1\nsearcher:\n  name: single\n  metric: loss\n"
        "  max_length: 1\n"
    )
    with TestClient(create_app(make_settings(tmp_path / "home"))) as client:
        state = client.app.state.master  # type: ignore[attr-defined]
        sync, auth, experiment_id = agent_and_experiment(client, config)
        (spec,) = sync([], 10)["start"]
        trial_id, run = int(spec["env"]["DET_TRIAL_ID"]), int(spec["env"]["DET_TRIAL_RUN_ID"])

        def report(step: int, trial: int = trial_id, run_id: int = run) -> dict[str, Any]:
            return {
                "group": "validation",
                "metrics": {
                    "trialId": trial,
                    "trialRunId": run_id,
                    "stepsCompleted": step,
                    "reportTime": f"2026-12-06T10:00:0{step}+00:00",
                    "metrics": {"avgMetrics": {"loss": 1.0 / step}},
                },
            }

        running = {"allocation_id": spec["allocation_id"], "rank": 0, "state": "RUNNING"}
        assert sync([running], 0)["start"] == []
        # The first report was posted too (its post was under way when the harness closed).
        task = {"Grpc-Metadata-x-allocation-token": f"Bearer {spec['token']}"}
        posted = client.post(
            "/api/v1/trials/metrics/batch", json={"reports": [report(1)]}, headers=task
        )
        assert posted.status_code == 200, posted.text
        reports = [report(1), report(2), report(3, trial=trial_id + 1), report(4, run_id=run + 1)]
        exited = {**running, "state": "EXITED", "exit_code": 0, "reports": reports}
        assert sync([exited], 10)["forget"] == [f"{spec['allocation_id']}/0"]
        sync([exited], 0)  # repeated before it is forgotten: stored with the first one
        wait_for(
            "the experiment to complete",
            lambda: (
                client.get(f"/api/v1/experiments/{experiment_id}", headers=auth).json()[
                    "experiment"
                ]["state"]
                == "STATE_COMPLETED"
            ),
        )
        with state.sessions() as session:
            stored = session.scalars(
                select(MetricReport.steps_completed)
                .where(MetricReport.trial_id == trial_id)
                .order_by(MetricReport.steps_completed)
            ).all()
            lines = session.scalars(
                select(TaskLog.log).where(TaskLog.task_id == spec["task_id"])
            ).all()
    assert stored == [1, 2]
    refused = [line for line in lines if "sent with the exit not stored" in line]
    assert len(refused) == 2, lines
    assert f"names trial {trial_id + 1}" in refused[0] + refused[1]
    assert f"of run {run + 1}" in refused[0] + refused[1]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_an_agent_that_cancels_its_sync_mid_body_is_no_error(tmp_path: Path) -> None:
    """An agent cancels a held sync as soon as one of its tasks exits: when it leaves before
    the body arrived, the master records a 499 quietly instead of an error with a traceback."""
    records = _Records()
    watched = [logging.getLogger("uvicorn.error"), logging.getLogger("stalwart.master.api.errors")]
    with serve(make_settings(tmp_path / "home")) as master, master.http() as http:
        levels = [logger.level for logger in watched]  # uvicorn configured its loggers by now
        for logger in watched:
            logger.addHandler(records)
            logger.setLevel(logging.DEBUG)
        try:
            headers = enroll(http, "n1", master.state.agent_token)
            with socket.create_connection(("127.0.0.1", master.port)) as conn:
                head = (
                    "POST /api/v1/agents/n1/sync HTTP/1.1\r\nHost: x\r\n"
                    f"{AGENT_TOKEN_HEADER}: {headers[AGENT_TOKEN_HEADER]}\r\n"
                    "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
                )
                conn.sendall(head.encode() + b'{"slots": [')
            wait_for("the master to see the request end", lambda: bool(records.records))
            assert http.get("/api/v1/master").status_code == 200  # still serving
        finally:
            for logger, level in zip(watched, levels, strict=True):
                logger.removeHandler(records)
                logger.setLevel(level)
    assert [r.levelno for r in records.records] == [logging.DEBUG], [
        r.getMessage() for r in records.records
    ]
    assert "left before its body arrived" in records.records[0].getMessage()
    assert CLIENT_CLOSED_REQUEST == 499
