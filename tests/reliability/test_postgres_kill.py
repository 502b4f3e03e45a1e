"""PostgreSQL backends terminated while a trial reports: the master heals, nothing is lost.

The master runs on PostgreSQL (a private schema, ``pg_url``); while a trial reports a metric
every few milliseconds, a separate connection terminates every backend of this master (by its
``application_name``) again and again. The master must recover on its own (its pool checks
connections before use; a statement cut off mid-flight is answered 503, which clients retry),
the trial must neither fail nor restart, and every step must be stored exactly once.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from stalwart.master.api.errors import database_error_is_transient
from tests.conftest import PG_URL
from tests.integration.api import Api
from tests.reliability.conftest import Pids, experiment_config, make_cluster, steady_files, steps

SINGLE = "  name: single\n  metric: loss\n  smaller_is_better: true"
STEPS = 150


def _terminator(app: str, stop: threading.Event, killed: list[int]) -> None:
    engine = create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        while not stop.is_set():
            with engine.begin() as conn:
                rows = conn.execute(
                    text(
                        "select pg_terminate_backend(pid) from pg_stat_activity "
                        "where datname = current_database() and pid <> pg_backend_pid() "
                        "and application_name = :app"
                    ),
                    {"app": app},
                ).all()
            killed.append(len(rows))
            stop.wait(0.15)
    finally:
        engine.dispose()


def _stored(api: Api, trial_id: int) -> int:
    """Steps stored so far; 0 while the master answers 503 (its database connection was just
    terminated: clients retry that, as this poll does) or cuts a streamed answer short (a
    backend terminated after the headers were sent)."""
    try:
        return len(steps(api, trial_id))
    except httpx.RemoteProtocolError:
        return 0
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 503:
            return 0
        raise


def test_terminated_backends_during_ingest_lose_nothing(
    tmp_path: Path, pg_url: str, pids: Pids
) -> None:
    app = f"stalwart-reliability-{uuid.uuid4().hex[:8]}"
    cluster = make_cluster(tmp_path, db=f"{pg_url}&application_name={app}")
    cluster.start_master()
    stop = threading.Event()
    killed: list[int] = []
    try:
        cluster.start_agent("a1", slots=1)
        api = Api(cluster.url)
        hp = f"  steps: {STEPS}\n  period: 10\n  sleep: 0.01\n  pid_dir: {pids.root}"
        exp_id = api.create_experiment(experiment_config(SINGLE, hp), steady_files())
        trial_id = api.wait_until(
            lambda: [t["id"] for t in api.trials(exp_id) if steps(api, t["id"])],
            timeout=60,
            what="a reporting trial",
        )[0]
        terminator = threading.Thread(target=_terminator, args=(app, stop, killed))
        terminator.start()
        try:
            api.wait_until(
                lambda: sum(killed) >= 20 or _stored(api, trial_id) >= STEPS,
                timeout=30,
                what="backends terminated during ingest",
            )
            time.sleep(0.5)
        finally:
            stop.set()
            terminator.join()
        assert sum(killed) > 0, killed
        exp = api.wait_state(exp_id, timeout=90)
        assert exp["state"] == "STATE_COMPLETED", api.logs(trial_id)
        (trial,) = api.trials(exp_id)
        assert trial["restarts"] == 0, api.logs(trial_id)  # the trial never saw a failure
        assert sorted(pids.runs(trial_id)) == [1]
        assert steps(api, trial_id) == list(range(1, STEPS + 1))  # none lost, none twice
        assert steps(api, trial_id, "validation") == list(range(10, STEPS + 1, 10))
        api.close()
    finally:
        cluster.stop()


class _PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("orig", "invalidated", "transient"),
    [
        (_PgError("57P01"), False, True),  # admin_shutdown: a terminated backend
        (_PgError("08006"), False, True),  # connection_failure
        (_PgError("40001"), False, True),  # serialization_failure
        (_PgError("40P01"), False, True),  # deadlock_detected
        (_PgError("42P01"), False, False),  # undefined_table: a bug, not an outage
        (_PgError("23505"), False, False),  # unique_violation
        (Exception("server closed the connection"), True, True),
        (Exception("database is locked"), False, True),  # SQLite busy
        (Exception("no such table: trials"), False, False),
    ],
)
def test_which_database_errors_are_answered_503(
    orig: Exception, invalidated: bool, transient: bool
) -> None:
    exc = OperationalError("select 1", {}, orig, connection_invalidated=invalidated)
    assert database_error_is_transient(exc) is transient
