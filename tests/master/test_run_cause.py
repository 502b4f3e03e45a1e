"""The cause of a failed run (``/api/v1/ui/trials/{id}/cause``, ``/api/v1/ui/experiments/{id}/
cause``) on SQLite and PostgreSQL, with allocations ended through the trial lifecycle: which
lines are chosen, a lost allocation's reason, and a run that wrote nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from stalwart.master.cluster.lifecycle import end_allocation
from stalwart.master.db.tables import Allocation
from tests.master.conftest import make_settings
from tests.master.test_allocations_api import (
    CONFIG,
    LiveServer,
    TrialEnv,
    live_server,
    login_headers,
    make_trial,
)
from tests.master.test_logs_api import post, ship


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    extra = {"db": request.getfixturevalue("pg_url")} if request.param == "postgresql" else {}
    with live_server(make_settings(tmp_path / "home", **extra)) as running:
        yield running


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        client.headers.update(login_headers(client))
        yield client


def _trial(server: LiveServer, http: httpx.Client, max_restarts: int = 0) -> TrialEnv:
    config = f"{CONFIG}max_restarts: {max_restarts}\n"
    return make_trial(http, server.state, dict(http.headers), config=config)


def _end(server: LiveServer, env: TrialEnv, code: int | None, reason: str | None = None) -> None:
    with server.state.sessions() as session:
        allocation = session.get(Allocation, env.allocation_id)
        assert allocation is not None
        end_allocation(session, allocation, code, reason)
        session.commit()


def _cause(http: httpx.Client, env: TrialEnv) -> dict[str, Any]:
    resp = http.get(f"/api/v1/ui/trials/{env.trial_id}/cause")
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def test_a_running_trial_has_no_cause(server: LiveServer, http: httpx.Client) -> None:
    env = _trial(server, http)
    assert post(http, env, [ship(env, "Traceback\n", stdtype="stderr")]).is_success
    cause = _cause(http, env)
    assert (cause["state"], cause["failed"], cause["failure"]) == ("STATE_ACTIVE", False, None)
    assert (cause["lines"], cause["linesKind"], cause["dontRetry"]) == ([], "none", [])


def test_the_last_twenty_error_lines_of_the_run(server: LiveServer, http: httpx.Client) -> None:
    env = _trial(server, http)
    lines = [ship(env, f"step {n}\n", level="LOG_LEVEL_INFO") for n in range(5)]
    lines += [ship(env, f"err {n}\n", stdtype="stderr") for n in range(25)]
    lines += [
        ship(env, "INFO: a logging record on stderr\n", stdtype="stderr", level="INFO"),
        ship(env, "CRITICAL: on stdout\n", level="CRITICAL"),
        ship(env, "agent says\n", source="agent", level="ERROR"),
    ]
    assert post(http, env, lines).is_success
    _end(server, env, 137)
    cause = _cause(http, env)
    assert (cause["state"], cause["failed"]) == ("STATE_ERROR", True)
    assert cause["failure"]["exitCode"] == 137
    assert cause["failure"]["exitReason"] == "it exited with code 137"
    assert cause["linesKind"] == "errors"
    assert [line["log"] for line in cause["lines"]] == [
        *(f"err {n}\n" for n in range(6, 25)),
        "CRITICAL: on stdout\n",
    ]
    experiment = http.get(f"/api/v1/ui/experiments/{env.experiment_id}/cause").json()
    # (no cluster loop here feeds the searcher, so the experiment itself stays ACTIVE)
    assert (experiment["experimentId"], experiment["trialsErrored"]) == (env.experiment_id, 1)
    assert experiment["firstErroredTrial"] == cause


def test_a_lost_run_that_wrote_nothing(server: LiveServer, http: httpx.Client) -> None:
    env = _trial(server, http)
    _end(server, env, None, "agent a1 was lost")
    cause = _cause(http, env)
    assert cause["failure"]["exitCode"] is None
    assert cause["failure"]["exitReason"] == "agent a1 was lost"
    # the master's own lines about the end are not the run's: nothing to show
    assert (cause["lines"], cause["linesKind"]) == ([], "none")


def test_a_run_killed_by_a_signal_shows_its_last_lines(
    server: LiveServer, http: httpx.Client
) -> None:
    env = _trial(server, http)
    assert post(http, env, [ship(env, f"step {n}\n") for n in range(3)]).is_success
    _end(server, env, -9)
    cause = _cause(http, env)
    assert cause["failure"]["exitReason"] == "it was killed by signal 9"
    assert cause["linesKind"] == "last"
    assert [line["log"] for line in cause["lines"]] == ["step 0\n", "step 1\n", "step 2\n"]
