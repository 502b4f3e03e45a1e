"""Log lines: parsing, and the shipper posting to a real master (batches, order, an outage
with a bounded buffer, refusals, the flush on close)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from stalwart.agent.logs import ContainerLog, LogContext, parse_line
from stalwart.agent.shipper import LogShipper
from tests.agent.conftest import Master, master_settings, serve, wait_for
from tests.master.test_allocations_api import TrialEnv


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("plain\n", ("plain\n", None, None)),
        ("[rank=3] INFO: ready\n", ("ready\n", 3, "LOG_LEVEL_INFO")),
        ("[rank=0] hello\n", ("hello\n", 0, None)),
        ("WARNING: careful\n", ("careful\n", None, "LOG_LEVEL_WARNING")),
        ("CRITICAL:bad\n", ("bad\n", None, "LOG_LEVEL_CRITICAL")),
        ("note INFO: not a prefix\n", ("note INFO: not a prefix\n", None, None)),
        ("[rank=x] no\n", ("[rank=x] no\n", None, None)),
        ("\n", ("\n", None, None)),
    ],
)
def test_parse_line(line: str, parsed: tuple[str, int | None, str | None]) -> None:
    assert parse_line(line) == parsed


def context(trial: TrialEnv, token: str | None = None) -> LogContext:
    return LogContext(
        task_id=trial.task_id,
        allocation_id=trial.allocation_id,
        agent_id="agent-1",
        container_id="container-1",
        token=token or trial.token,
    )


@pytest.fixture
def shipper(master: Master) -> Iterator[LogShipper]:
    ship = LogShipper(master.url, batch_lines=3, flush_seconds=0.05, max_backoff_seconds=0.2)
    ship.start()
    yield ship
    ship.close(timeout=2.0)


def shipped(stream: ContainerLog) -> None:
    mark = stream.mark()
    wait_for("the lines to be shipped", lambda: stream.flushed(mark))


def test_lines_reach_the_master_in_order_with_their_fields(
    master: Master, trial: TrialEnv, shipper: LogShipper
) -> None:
    stream = shipper.open(context(trial))
    for i in range(7):  # three batches of at most 3
        stream.line(f"line {i}\n", "stdout")
    stream.line("[rank=1] ERROR: broken\n", "stderr")
    stream.agent_line("container exited with code 0")
    shipped(stream)
    logs = master.task_logs(trial.task_id)
    assert [entry["log"] for entry in logs] == [
        *(f"line {i}\n" for i in range(7)),
        "broken\n",
        "container exited with code 0\n",
    ]
    first, error, agent = logs[0], logs[7], logs[8]
    assert (first["stdtype"], first["source"], first["agentId"], first["containerId"]) == (
        "stdout",
        "task",
        "agent-1",
        "container-1",
    )
    assert first["allocationId"] == trial.allocation_id
    assert (error["rankId"], error["level"], error["stdtype"]) == (1, "LOG_LEVEL_ERROR", "stderr")
    assert (agent["source"], agent["level"]) == ("agent", "LOG_LEVEL_INFO")
    assert "broken" in error["message"]
    assert "[rank=1]" in error["message"]


def test_a_refused_batch_is_dropped_with_a_warning(
    master: Master, trial: TrialEnv, shipper: LogShipper, caplog: pytest.LogCaptureFixture
) -> None:
    bad = shipper.open(context(trial, token="not-a-token"))
    good = shipper.open(context(trial))
    with caplog.at_level(logging.WARNING, logger="stalwart.agent.shipper"):
        bad.line("lost\n", "stdout")
        good.line("kept\n", "stdout")
        shipped(bad)
        shipped(good)
    assert "refused 1 log lines" in caplog.text
    assert "HTTP 401" in caplog.text
    assert [entry["log"] for entry in master.task_logs(trial.task_id)] == ["kept\n"]


def test_close_flushes_what_is_queued(master: Master, trial: TrialEnv) -> None:
    ship = LogShipper(master.url, flush_seconds=60.0)  # never on its own during the test
    ship.start()
    stream = ship.open(context(trial))
    stream.line("last words\n", "stdout")
    ship.close(timeout=5.0)
    assert stream.flushed(stream.mark())
    assert [entry["log"] for entry in master.task_logs(trial.task_id)] == ["last words\n"]


def test_an_outage_keeps_the_newest_lines_and_they_arrive_when_the_master_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = master_settings(tmp_path / "home")
    with serve(settings) as first:
        trial, port, url = first.trial(), first.port, first.url
    # The master is down now; the shipper buffers at most 5 lines.
    ship = LogShipper(url, flush_seconds=0.05, buffer_lines=5, max_backoff_seconds=0.2)
    ship.start()
    try:
        with caplog.at_level(logging.INFO, logger="stalwart.agent"):
            stream = ship.open(context(trial))
            for i in range(8):
                stream.line(f"line {i}\n", "stdout")
            assert stream.pending() == 5
            wait_for("a failed post", lambda: "cannot ship logs" in caplog.text)
            assert not stream.flushed(stream.mark())
            with serve(settings, port=port) as again:
                shipped(stream)
                logs = again.task_logs(trial.task_id)
        assert [entry["log"] for entry in logs] == [f"line {i}\n" for i in range(3, 8)]
        assert "dropping the oldest" in caplog.text
        assert "dropped 3 log lines" in caplog.text
        assert "log shipping resumed" in caplog.text
    finally:
        ship.close(timeout=1.0)


def test_hand_over_takes_the_unshipped_lines_unless_the_shipper_is_posting_them(
    master: Master, trial: TrialEnv
) -> None:
    ship = LogShipper(master.url, flush_seconds=60.0)  # posts only when the test says so
    stream = ship.open(context(trial))
    stream.line("shipped\n", "stdout")
    batch = stream.peek(10)  # what the shipper does: a batch in flight...
    stream.line("last\n", "stdout")
    assert stream.hand_over(10) is None  # ...so the lines stay the shipper's
    stream.done_through(batch[-1][0])  # posted
    stream.settle()
    taken = stream.hand_over(10)
    assert taken is not None
    assert [entry["log"] for entry in taken] == ["last\n"]
    assert stream.pending() == 0
    assert stream.peek(10) == []  # nothing left for the shipper to post twice


def test_hand_over_leaves_more_than_a_batch_to_the_shipper(trial: TrialEnv, master: Master) -> None:
    ship = LogShipper(master.url, flush_seconds=60.0)
    stream = ship.open(context(trial))
    for i in range(3):
        stream.line(f"line {i}\n", "stdout")
    assert stream.hand_over(2) is None
    taken = stream.hand_over(3)
    assert taken is not None
    assert [entry["log"] for entry in taken] == ["line 0\n", "line 1\n", "line 2\n"]
    assert stream.pending() == 0
    assert stream.flushed(stream.mark())
