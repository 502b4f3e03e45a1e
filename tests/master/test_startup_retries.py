"""A master started while its database blips starts anyway: start-up steps the database fails
transiently run again (a PostgreSQL backend really terminated here), others fail at once."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError

from stalwart.master.app import with_database_retries
from stalwart.master.db.engine import make_engine


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def test_a_step_whose_backend_is_terminated_runs_again(pg_url: str) -> None:
    engine, admin = make_engine(pg_url), make_engine(pg_url)
    clock = FakeClock()
    calls = 0

    def step() -> int:
        nonlocal calls
        calls += 1
        with engine.connect() as conn:
            if calls == 1:  # an operator (or a failover) ends this backend mid-step
                pid = conn.execute(text("select pg_backend_pid()")).scalar_one()
                with admin.connect() as other:
                    other.execute(text("select pg_terminate_backend(:pid)"), {"pid": pid})
            return int(conn.execute(text("select 42")).scalar_one())

    try:
        found = with_database_retries("testing", step, sleep=clock.sleep, clock=lambda: clock.now)
    finally:
        engine.dispose()
        admin.dispose()
    assert found == 42
    assert calls == 2
    assert clock.waits == [0.5]


def test_other_errors_fail_at_once_and_blips_give_up_at_the_deadline(pg_url: str) -> None:
    engine = make_engine(pg_url)
    clock = FakeClock()

    def broken() -> None:
        with engine.connect() as conn:
            conn.execute(text("select * from no_such_table"))

    def always_terminated() -> None:
        with engine.connect() as conn:
            conn.execute(text("select pg_terminate_backend(pg_backend_pid())"))

    try:
        with pytest.raises(ProgrammingError):
            with_database_retries("testing", broken, sleep=clock.sleep, clock=lambda: clock.now)
        assert clock.waits == []
        with pytest.raises(DBAPIError) as raised:
            with_database_retries(
                "testing",
                always_terminated,
                deadline_s=10,
                sleep=clock.sleep,
                clock=lambda: clock.now,
            )
    finally:
        engine.dispose()
    assert isinstance(raised.value, OperationalError)
    assert clock.waits == [0.5, 1.0, 2.0, 4.0]  # the next (5 s) would end past 10 s
