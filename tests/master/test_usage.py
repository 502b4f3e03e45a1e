"""Historical usage (:mod:`stalwart.master.services.usage` and its routes) on rows written by
hand: windows, clipping, slot-seconds per day and month, labels, pull seconds, refusals."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from stalwart.errors import InvalidArgumentError
from stalwart.master.db.tables import Allocation, Container, Experiment, Task, User
from stalwart.master.services import usage
from tests.master.conftest import login

T0 = dt.datetime(2026, 3, 31, 22, 0, tzinfo=dt.UTC)


def _allocation(
    session: Session,
    name: str,
    *,
    start: dt.datetime,
    end: dt.datetime | None,
    slots: int,
    experiment: Experiment | None = None,
    pull: float | None = None,
    placed: bool = True,
) -> None:
    task = Task(
        task_id=f"task-{name}",
        task_type="TRIAL" if experiment is not None else "COMMAND",
        owner_id=1,
        experiment_id=experiment.id if experiment is not None else None,
        trial_id=1 if experiment is not None else None,
        workspace_id=None if experiment is not None else 1,
    )
    session.add(task)
    session.flush()
    session.add(
        Allocation(
            id=f"{task.task_id}.1",
            task_id=task.task_id,
            state="TERMINATED" if end is not None else "RUNNING",
            token_sha256=name.ljust(64, "0"),
            slots=slots,
            resource_pool="default",
            agent_id="node-1",
            start_time=start - dt.timedelta(minutes=5),
            end_time=end,
            pull_seconds=pull,
        )
    )
    session.flush()
    if placed:
        session.add(
            Container(
                allocation_id=f"{task.task_id}.1",
                rank=0,
                agent_id="node-1",
                state="EXITED" if end is not None else "RUNNING",
                assigned_at=start,
            )
        )
    session.commit()


@pytest.fixture
def rows(client: TestClient) -> None:
    state = client.app.state.master  # type: ignore[attr-defined]
    with state.sessions() as session:
        experiment = Experiment(
            name="labelled",
            state="COMPLETED",
            labels=["vision", "big"],
            project_id=1,
            owner_id=session.get(User, 1).id,
            original_config="{}",
            config={},
            searcher_type="single",
            job_id="job-1",
        )
        session.add(experiment)
        session.commit()
        # 22:00 -> 02:00 across midnight and the month's end, 2 slots, pulled for 3.5 s
        _allocation(
            session,
            "trial",
            start=T0,
            end=T0 + dt.timedelta(hours=4),
            slots=2,
            experiment=experiment,
            pull=3.5,
        )
        _allocation(session, "cmd", start=T0 + dt.timedelta(hours=1), end=None, slots=1)
        _allocation(session, "queued", start=T0, end=None, slots=1, placed=False)


def test_rows_in_a_window_are_clipped_to_it(client: TestClient, rows: None) -> None:
    state = client.app.state.master  # type: ignore[attr-defined]
    now = T0 + dt.timedelta(hours=3)
    with state.sessions() as session:
        found = usage.allocation_rows(session, T0, T0 + dt.timedelta(hours=2), now)
        assert [(r.task_id, r.seconds) for r in found] == [
            ("task-trial", 7200.0),
            ("task-cmd", 3600.0),
        ]
        trial = found[0]
        assert trial.labels == ("vision", "big")
        assert trial.experiment_name == "labelled"
        assert trial.username == "admin"
        assert trial.workspace_name == "Uncategorized"
        assert trial.pull_seconds == 3.5
        later = usage.allocation_rows(
            session,
            T0 + dt.timedelta(hours=5),
            T0 + dt.timedelta(hours=7),
            now=T0 + dt.timedelta(hours=6),
        )
        assert [(r.task_id, r.seconds) for r in later] == [("task-cmd", 3600.0)]  # still running
        with pytest.raises(InvalidArgumentError, match="before it starts"):
            usage.allocation_rows(session, now, T0, now)


def test_daily_and_monthly_slot_seconds(client: TestClient, rows: None) -> None:
    state = client.app.state.master  # type: ignore[attr-defined]
    now = T0 + dt.timedelta(hours=4)
    with state.sessions() as session:
        days = usage.aggregate(session, T0.date(), dt.date(2026, 4, 1), usage.DAILY, now)
        assert [(d.start.isoformat(), d.seconds) for d in days] == [
            ("2026-03-31", 2 * 7200.0 + 3600.0),
            ("2026-04-01", 2 * 7200.0 + 2 * 3600.0),
        ]
        assert days[0].by_experiment_label == {"vision": 14400.0, "big": 14400.0}
        assert days[1].by_username == {"admin": 21600.0}
        assert days[1].by_agent == {"node-1": 21600.0}
        months = usage.aggregate(session, T0.date(), dt.date(2026, 4, 1), usage.MONTHLY, now)
        assert [(m.start.isoformat(), m.seconds) for m in months] == [
            ("2026-03-01", 18000.0),
            ("2026-04-01", 21600.0),
        ]
        with pytest.raises(InvalidArgumentError, match="period must be"):
            usage.aggregate(session, T0.date(), T0.date(), "WEEKLY", now)


def test_routes_answer_admins_only_and_check_their_parameters(
    client: TestClient, rows: None, admin: dict[str, str]
) -> None:
    after, before = "2026-03-31T00:00:00Z", "2026-04-02T00:00:00Z"
    resp = client.get(
        "/resources/allocation/allocations-csv",
        params={"timestamp_after": after, "timestamp_before": before},
        headers=admin,
    )
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(resp.text)))
    assert tuple(table[0]) == usage.CSV_COLUMNS
    assert {r["task_id"]: r["pull_seconds"] for r in table} == {
        "task-trial": "3.500",
        "task-cmd": "",
    }
    raw = client.get(
        "/api/v1/resources/allocation/raw",
        params={"timestampAfter": after, "timestampBefore": before},
        headers=admin,
    )
    assert [e["kind"] for e in raw.json()["resourceEntries"]] == ["experiment", "command"]
    agg = client.get(
        "/api/v1/resources/allocation/aggregated",
        params={
            "start_date": "2026-03-31",
            "end_date": "2026-03-31",
            "period": "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY",
        },
        headers=admin,
    )
    assert agg.status_code == 200, agg.text
    assert agg.json()["resourceEntries"][0]["byResourcePool"] == {"default": 18000.0}
    bad = client.get(
        "/api/v1/resources/allocation/raw", params={"timestampAfter": "yesterday"}, headers=admin
    )
    assert bad.status_code == 400
    assert "RFC 3339" in bad.text
    assert client.get("/resources/allocation/allocations-csv").status_code == 401
    client.post(
        "/api/v1/users",
        json={"user": {"username": "dan", "active": True}, "password": "", "isHashed": False},
        headers=admin,
    )
    dan = login(client, "dan")
    refused = client.get(
        "/resources/allocation/raw",
        params={"timestamp_after": after, "timestamp_before": before},
        headers=dan,
    )
    assert refused.status_code == 403
