"""Log retention's day arithmetic and the master's cleanup schedule, on a real master state:
which trial logs expire when, what the remaining days say, and ``retention_policy.schedule``
deleting expired logs by itself (the official client's calls are in
tests/compat/test_det_log_retention.py)."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from stalwart.errors import ConfigError, InvalidArgumentError
from stalwart.master.db.tables import TaskLog, Trial
from stalwart.master.services import log_retention as service
from stalwart.master.services.logs import NewLog, add_logs
from stalwart.master.settings import load_settings, parse_duration
from stalwart.master.state import MasterState
from tests.master.test_allocations_api import TrialEnv, make_trial, master_state

END = dt.datetime(2025, 5, 1, 12, 0, tzinfo=dt.UTC)


def _ended_trial(client: TestClient, admin: dict[str, str]) -> tuple[MasterState, TrialEnv]:
    state = master_state(client)
    env = make_trial(client, state, admin)
    with state.sessions() as session:
        add_logs(session, [NewLog(task_id=env.task_id, log=f"line {i}") for i in range(3)])
        trial = session.get(Trial, env.trial_id)
        assert trial is not None
        trial.end_time = END
        session.commit()
    return state, env


def _lines(state: MasterState, task_id: str) -> int:
    with state.sessions() as session:
        return int(session.scalar(select(func.count()).where(TaskLog.task_id == task_id)) or 0)


def test_logs_expire_days_after_the_end(client: TestClient, admin: dict[str, str]) -> None:
    state, env = _ended_trial(client, admin)
    with state.sessions() as session:
        service.set_trial_retention(session, env.trial_id, 3)
        session.commit()
        left = service.remaining_days(session, env.trial_id, None, now=END + dt.timedelta(hours=30))
        assert left == 1  # 1 day 18 hours left: whole days
        assert service.cleanup_logs(session, None, now=END + dt.timedelta(days=2)) == 0
    assert _lines(state, env.task_id) == 3
    with state.sessions() as session:
        assert service.cleanup_logs(session, None, now=END + dt.timedelta(days=3)) == 3
        session.commit()
        assert service.remaining_days(session, env.trial_id, None) == 0
    assert _lines(state, env.task_id) == 0


def test_unset_retention_keeps_logs_forever_unless_the_master_says(
    client: TestClient, admin: dict[str, str]
) -> None:
    state, env = _ended_trial(client, admin)
    later = END + dt.timedelta(days=10000)
    with state.sessions() as session:
        assert service.remaining_days(session, env.trial_id, None) == service.FOREVER
        assert service.cleanup_logs(session, None, now=later) == 0
        assert service.cleanup_logs(session, 20000, now=later) == 0
        assert service.cleanup_logs(session, 5, now=later) == 3


def test_a_running_trial_has_no_remaining_days_and_keeps_its_logs(
    client: TestClient, admin: dict[str, str]
) -> None:
    state = master_state(client)
    env = make_trial(client, state, admin)
    with state.sessions() as session:
        add_logs(session, [NewLog(task_id=env.task_id, log="running")])
        session.commit()
        assert service.remaining_days(session, env.trial_id, 0) is None
        assert service.cleanup_logs(session, 0) == 0


def test_days_out_of_range_are_refused(client: TestClient, admin: dict[str, str]) -> None:
    state, env = _ended_trial(client, admin)
    with state.sessions() as session, pytest.raises(InvalidArgumentError, match="32767"):
        service.set_trial_retention(session, env.trial_id, -2)


def test_schedule_durations() -> None:
    assert parse_duration("24h") == 86400
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    with pytest.raises(ValueError, match="cron schedules are not supported"):
        parse_duration("0 0 * * *")
    with pytest.raises(ConfigError, match="schedule"):
        load_settings(overrides={"retention_policy": {"schedule": "daily"}})


def test_the_schedule_deletes_expired_logs_by_itself(
    client: TestClient, admin: dict[str, str]
) -> None:
    state, env = _ended_trial(client, admin)
    schedule = service.CleanupSchedule(state.sessions, 1, 0.05)
    schedule.start()
    try:
        deadline = time.monotonic() + 10
        while _lines(state, env.task_id) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        schedule.stop()
    assert _lines(state, env.task_id) == 0
