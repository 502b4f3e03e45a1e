"""A clean stop of the master (SIGTERM): bounded in time, nothing lost, nothing stored twice.

A real ``stalwart master`` process (SQLite) is stopped with SIGTERM while 20 clients, each a
thread with the harness's own code path (:class:`~stalwart.core._client.Session` under
:class:`~stalwart.core._metrics.MetricsShipper`), post metrics of one trial, and the harness's
preemption watcher holds its long-poll (before the clean stop, that long-poll held the master
until uvicorn's graceful timeout cancelled it). The process must
be gone within 5 s of the signal. The clients ride out the stop (503 with ``Retry-After``,
then refused connections) until a new master answers on the same database; then every report
of every client is stored exactly once. A second test holds the promise that waits (a log
follow, a preemption long-poll) end at once on a stop instead of holding it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bench.load import create_experiment, seed_trials
from sqlalchemy import func, select

from stalwart.core._client import RetryPolicy, Session
from stalwart.core._metrics import MetricsShipper, prepare_report
from stalwart.core._preempt import _Watcher
from stalwart.local import LocalCluster, wait_for
from stalwart.master.db.engine import make_engine
from stalwart.master.db.tables import Allocation, MetricReport, Trial
from stalwart.master.stopping import STOP_BUDGET_S
from tests.integration.conftest import free_port

CLIENTS = 20
STEPS_APART = 1_000_000  # client i reports steps i * STEPS_APART + 1, + 2, ...


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    home = tmp_path / "home"
    found = LocalCluster(home=home, port=free_port(), db=f"sqlite:///{tmp_path / 'master.db'}")
    found.start_master()
    try:
        yield found
    finally:
        found.stop()


def _sigterm(cluster: LocalCluster) -> float:
    """SIGTERM the master; seconds until its process is gone."""
    assert cluster.master is not None
    started = time.monotonic()
    os.kill(cluster.master.pid, signal.SIGTERM)
    cluster.master.wait(timeout=30)
    took = time.monotonic() - started
    cluster.master = None
    return took


def _stored(db_url: str, trial_id: int) -> dict[int, int]:
    """``{steps_completed: how many reports}`` of the trial's training group."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(MetricReport.steps_completed, func.count())
                .where(MetricReport.trial_id == trial_id, MetricReport.group == "training")
                .group_by(MetricReport.steps_completed)
            ).all()
    finally:
        engine.dispose()
    return {int(step): int(count) for step, count in rows}


class Reporter(threading.Thread):
    """One client: reports a step every few milliseconds until told to finish, then flushes
    (its session retries until a master answers)."""

    def __init__(self, index: int, url: str, target: dict[str, object], finish: threading.Event):
        super().__init__(name=f"reporter-{index}", daemon=True)
        self.index = index
        self.finish = finish
        self.sent: list[int] = []
        self.error: BaseException | None = None
        self.dropped = 0
        policy = RetryPolicy(initial_backoff_s=0.05, max_backoff_s=0.5, deadline_s=120.0)
        self.session = Session(url, str(target["token"]), retry=policy, timeout_s=30)
        self.shipper = MetricsShipper(
            self.session, int(str(target["trial_id"])), int(str(target["run_id"])), max_batch=20
        )

    def run(self) -> None:
        try:
            step = self.index * STEPS_APART
            while not self.finish.is_set():
                step += 1
                self.shipper.publish(prepare_report("training", step, {"loss": 1.0 / step}))
                self.sent.append(step)
                time.sleep(0.01)
            self.shipper.close()
            self.dropped = self.shipper.dropped
        except BaseException as exc:
            self.error = exc
        finally:
            self.session.close()


def test_sigterm_during_ingest_exits_within_5s_and_every_report_is_stored_once(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    assert cluster.db is not None
    target = seed_trials(cluster.db, create_experiment(cluster.url), 1)[0]
    finish = threading.Event()
    reporters = [Reporter(i, cluster.url, target, finish) for i in range(CLIENTS)]
    # As in a real trial, the harness's preemption watcher holds a long-poll meanwhile.
    watcher_session = Session(cluster.url, str(target["token"]), retry=RetryPolicy(0.05, 0.5))
    allocation_id = _allocation_of(cluster.db, int(str(target["trial_id"])))
    watcher = _Watcher(watcher_session, allocation_id)
    with caplog.at_level(logging.WARNING, logger="stalwart.core"):
        watcher.start()
        assert watcher.should_preempt() is False  # answered: the next poll is a long-poll
        for reporter in reporters:
            reporter.start()
        wait_for(lambda: all(len(r.sent) >= 20 for r in reporters), 60, "20 reports per client")

        took = _sigterm(cluster)
        print(f"the master stopped {took:.2f}s after SIGTERM")
        at_stop = [len(r.sent) for r in reporters]
        log = (cluster.home / "logs" / "master.log").read_text(errors="replace")
        assert took < STOP_BUDGET_S, f"the master took {took:.1f}s to stop:\n{log[-3000:]}"
        assert "CancelledError" not in log, log
        assert "graceful shutdown exceeded" not in log, log

        cluster.start_master()  # same database, same port
        wait_for(
            lambda: all(len(r.sent) >= n + 20 for r, n in zip(reporters, at_stop, strict=True)),
            60,
            "20 more reports per client after the restart",
        )
        finish.set()
        for reporter in reporters:
            reporter.join(150)
        watcher.close()
    assert not [r.name for r in reporters if r.is_alive()], "a client never finished"
    assert [r.error for r in reporters if r.error] == []
    assert sum(r.dropped for r in reporters) == 0
    retried = [r for r in caplog.records if "master unreachable" in r.getMessage()]
    assert retried, "no client saw the stop: the test proved nothing"

    stored = _stored(cluster.db, int(str(target["trial_id"])))
    sent = {step for r in reporters for step in r.sent}
    assert len(sent) == sum(len(r.sent) for r in reporters)
    twice = {step: n for step, n in stored.items() if n != 1}
    assert twice == {}, f"reports stored more than once: {sorted(twice.items())[:10]}"
    missing = sorted(sent - stored.keys())
    assert missing == [], f"{len(missing)} reports lost, e.g. {missing[:10]}"
    assert stored.keys() == sent


def test_a_stop_ends_follows_and_long_polls_at_once(cluster: LocalCluster) -> None:
    assert cluster.db is not None
    target = seed_trials(cluster.db, create_experiment(cluster.url), 1)[0]
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        login = http.post("/api/v1/auth/login", json={"username": "admin", "password": ""})
        admin = {"Authorization": f"Bearer {login.json()['token']}"}
        token = {"Grpc-Metadata-x-allocation-token": f"Bearer {target['token']}"}
        ended: dict[str, tuple[float, str]] = {}

        def follow() -> None:
            with http.stream(
                "GET", "/api/v1/master/logs", params={"follow": "true"}, headers=admin
            ) as lines:
                text = "".join(lines.iter_text())
            ended["follow"] = (time.monotonic(), text.strip().splitlines()[-1])

        allocation_id = _allocation_of(cluster.db, int(str(target["trial_id"])))

        def long_poll() -> None:
            answer = http.get(
                f"/api/v1/allocations/{allocation_id}/signals/preemption",
                params={"timeout_seconds": "60"},
                headers=token,
            )
            ended["long-poll"] = (time.monotonic(), answer.text)

        threads = [threading.Thread(target=follow), threading.Thread(target=long_poll)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)  # both are waiting by now (nothing wakes them before the stop)
        assert not ended
        stopped = time.monotonic()
        assert cluster.master is not None
        os.kill(cluster.master.pid, signal.SIGTERM)
        for thread in threads:
            thread.join(10)
        cluster.master.wait(10)
        cluster.master = None
    assert set(ended) == {"follow", "long-poll"}
    for name, (when, _) in ended.items():
        assert when - stopped < 1.5, f"the {name} held the stop for {when - stopped:.1f}s"
    assert '"preempt":false' in ended["long-poll"][1].replace(" ", "")
    assert '"httpCode": 503' in ended["follow"][1], ended["follow"][1]


def _allocation_of(db_url: str, trial_id: int) -> str:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            task_id = conn.execute(select(Trial.task_id).where(Trial.id == trial_id)).scalar_one()
            return str(
                conn.execute(
                    select(Allocation.id).where(Allocation.task_id == task_id)
                ).scalar_one()
            )
    finally:
        engine.dispose()
