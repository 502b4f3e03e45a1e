"""A metrics batch whose answer is lost is stored once when the harness sends it again.

The harness's metrics thread (:class:`~stalwart.core._metrics.MetricsShipper` over the Core API
:class:`~stalwart.core._client.Session`) talks to a real master on PostgreSQL through a TCP
proxy that, for its first connection, lets the request reach the master, waits until the
master starts answering (the batch is committed by then), and closes the connection without
passing the answer on: a lost answer. The session retries with ``X-Stalwart-Retry`` and the
master stores only the reports it does not have yet. Users rely on every step being stored
exactly once; a report sent again with a new ``reportTime`` (a real second report of the same
step) is still stored.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bench.load import create_experiment, seed_trials
from sqlalchemy import func, select

from stalwart.core._client import RETRY_HEADER, RetryPolicy, Session
from stalwart.core._metrics import MetricsShipper, prepare_report
from stalwart.local import LocalCluster
from stalwart.master.db.engine import make_engine
from stalwart.master.db.tables import MetricReport
from tests.integration.conftest import free_port


class AnswerLosingProxy:
    """Forwards TCP to ``upstream``; for the first ``lose`` connections the master's answer is
    swallowed and the client's connection closed once the answer starts."""

    def __init__(self, upstream: int, lose: int) -> None:
        self.upstream = upstream
        self.lose = lose
        self.lost = 0
        self.connections = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            losing = self.connections <= self.lose
            threading.Thread(target=self._serve, args=(client, losing), daemon=True).start()

    def _serve(self, client: socket.socket, losing: bool) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=30)
        pump = threading.Thread(target=_pump, args=(client, upstream), daemon=True)
        pump.start()
        with contextlib.closing(client), contextlib.closing(upstream):
            if losing:
                if upstream.recv(65536):  # the master answered: the batch is committed
                    self.lost += 1
                return
            _pump(upstream, client)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)


@pytest.fixture
def master(tmp_path: Path, pg_url: str) -> Iterator[LocalCluster]:
    cluster = LocalCluster(home=tmp_path / "home", port=free_port(), db=pg_url)
    cluster.start_master()
    try:
        yield cluster
    finally:
        cluster.stop()


def _stored_steps(db_url: str, trial_id: int) -> list[int]:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(MetricReport.steps_completed, func.count())
                .where(MetricReport.trial_id == trial_id)
                .group_by(MetricReport.steps_completed)
                .order_by(MetricReport.steps_completed)
            ).all()
    finally:
        engine.dispose()
    return [int(step) for step, count in rows for _ in range(int(count))]


def test_a_batch_whose_answer_was_lost_is_stored_once(master: LocalCluster, pg_url: str) -> None:
    target = seed_trials(pg_url, create_experiment(master.url), 1)[0]
    proxy = AnswerLosingProxy(master.port, lose=1)
    session = Session(
        f"http://127.0.0.1:{proxy.port}",
        target["token"],
        retry=RetryPolicy(initial_backoff_s=0.05, deadline_s=60),
        timeout_s=30,
    )
    try:
        shipper = MetricsShipper(session, target["trial_id"], target["run_id"])
        reports = [prepare_report("training", step, {"loss": 1.0 / step}) for step in (1, 2, 3)]
        for report in reports:
            shipper.publish(report)
        shipper.close()
        assert shipper.dropped == 0
    finally:
        session.close()
        proxy.close()
    assert proxy.lost == 1, "the proxy did not lose an answer: the test proved nothing"
    assert _stored_steps(pg_url, target["trial_id"]) == [1, 2, 3]

    # Sent again and again (as further retries would be): still once. A new report of step 3
    # (another reportTime) is a report of its own and is stored.
    first = reports[0]
    again = {
        "reports": [
            {
                "group": "training",
                "metrics": {
                    "metrics": {"avgMetrics": first.metrics, "batchMetrics": None},
                    "trialId": target["trial_id"],
                    "trialRunId": target["run_id"],
                    "stepsCompleted": first.steps_completed,
                    "reportTime": first.report_time,
                },
            }
        ]
    }
    later = json.loads(json.dumps(again))
    later["reports"][0]["metrics"]["stepsCompleted"] = 3
    later["reports"][0]["metrics"]["reportTime"] = dt.datetime.now(dt.UTC).isoformat()
    headers = {
        "Grpc-Metadata-x-allocation-token": f"Bearer {target['token']}",
        RETRY_HEADER: "2",
    }
    with httpx.Client(base_url=master.url, headers=headers, timeout=30) as http:
        for body in (again, again, later):
            assert http.post("/api/v1/trials/metrics/batch", json=body).status_code == 200
    assert _stored_steps(pg_url, target["trial_id"]) == [1, 2, 3, 3]
