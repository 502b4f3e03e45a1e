"""The columnar export (:mod:`stalwart.master.services.metric_tables`): one row per live report,
one typed column per metric, equal to what was reported, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import pyarrow as pa
import pytest

from stalwart.master.db.tables import Trial
from stalwart.master.services.metric_tables import ipc_stream, metrics_table
from stalwart.master.services.metrics import MetricsInput, report_metrics_many
from stalwart.master.services.tasks import start_allocation
from stalwart.master.state import MasterState
from tests.master.running_trials import running_trials

T0 = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def state(db_state: MasterState) -> MasterState:
    return db_state


def _report(
    state: MasterState, trial: int, steps: int, metrics: dict[str, Any], run: int = 1
) -> None:
    stamp = (T0 + dt.timedelta(seconds=steps, microseconds=17)).isoformat()
    report = MetricsInput(trial, run, "training", steps, metrics, report_time=stamp)
    with state.sessions() as session:
        report_metrics_many(session, [report])
        session.commit()


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """The table read back through an IPC stream, as a client does."""
    return pa.ipc.open_stream(ipc_stream(table)).read_all().to_pylist()


@pytest.mark.parametrize("batch", [2, 1000])
def test_each_live_report_is_one_row_with_a_typed_column_per_metric(
    state: MasterState, batch: int
) -> None:
    _, (first, second) = running_trials(state, 2)
    _report(state, first, 1, {"loss": 0.5, "batches": 1})
    _report(state, first, 2, {"loss": "NaN", "batches": 2, "lr": 0.1})
    _report(state, first, 3, {"loss": "Infinity", "batches": 3})
    _report(state, first, 4, {"loss": 0.25, "batches": 4, "steps_completed": 9})
    _report(state, second, 5, {"loss": "-Infinity"})
    table = metrics_table(state.sessions, [second, first], "training", batch=batch)

    assert table.column_names == [
        "trial_id", "trial_run_id", "steps_completed", "report_time",
        "loss", "batches", "lr", "metrics.steps_completed",
    ]  # fmt: skip
    types = dict(zip(table.column_names, table.schema.types, strict=True))
    assert types["batches"] == pa.int64()
    assert types["loss"] == pa.float64()
    assert types["report_time"] == pa.timestamp("us", tz="UTC")
    rows = _rows(table)
    assert [(r["trial_id"], r["steps_completed"]) for r in rows] == [
        (second, 5), (first, 1), (first, 2), (first, 3), (first, 4),
    ]  # fmt: skip
    assert rows[0]["loss"] == -math.inf
    assert rows[0]["batches"] is None
    assert rows[1]["loss"] == 0.5
    assert rows[1]["lr"] is None
    assert math.isnan(rows[2]["loss"])
    assert rows[2]["lr"] == 0.1
    assert rows[3]["loss"] == math.inf
    assert rows[4]["metrics.steps_completed"] == 9
    assert [r["batches"] for r in rows[1:]] == [1, 2, 3, 4]
    assert rows[1]["report_time"] == T0 + dt.timedelta(seconds=1, microseconds=17)
    assert {r["trial_run_id"] for r in rows} == {1}


def test_a_restarted_run_replaces_the_reports_it_superseded(state: MasterState) -> None:
    _, (trial,) = running_trials(state, 1)
    for steps in (1, 2, 3):
        _report(state, trial, steps, {"loss": float(steps)})
    with state.sessions() as session:  # run 2 resumes from step 1's checkpoint
        found = session.get(Trial, trial)
        assert found is not None
        start_allocation(session, found.task_id, slots=1)
        session.commit()
    _report(state, trial, 2, {"loss": 20.0}, run=2)
    rows = _rows(metrics_table(state.sessions, [trial], "training"))
    assert [(r["trial_run_id"], r["steps_completed"], r["loss"]) for r in rows] == [
        (1, 1, 1.0),
        (2, 2, 20.0),
    ]


def test_a_metric_of_mixed_kinds_becomes_json_text_and_the_rest_keep_their_types(
    state: MasterState,
) -> None:
    _, (trial,) = running_trials(state, 1)
    values: list[Any] = [1.5, "adam", {"a": 1}, True, "NaN"]
    for steps, value in enumerate(values, start=1):
        _report(state, trial, steps, {"mixed": value, "loss": steps / 2})
    table = metrics_table(state.sessions, [trial], "training")
    assert table.schema.field("mixed").type == pa.string()
    assert table.schema.field("loss").type == pa.float64()
    rows = _rows(table)
    assert [json.loads(r["mixed"]) for r in rows] == values
    assert [r["loss"] for r in rows] == [0.5, 1.0, 1.5, 2.0, 2.5]


def test_no_reports_is_an_empty_table_with_the_fixed_columns(state: MasterState) -> None:
    _, (trial,) = running_trials(state, 1)
    _report(state, trial, 1, {"loss": 1.0})
    table = metrics_table(state.sessions, [trial], "validation")
    assert table.num_rows == 0
    assert table.column_names == ["trial_id", "trial_run_id", "steps_completed", "report_time"]
    assert _rows(table) == []
