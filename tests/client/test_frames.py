"""The SDK's metrics DataFrames against a real master: the same reports as the NDJSON stream,
as pandas, polars and Arrow, per trial and per experiment; a missing library says what to
install."""

from __future__ import annotations

import sys

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from stalwart import errors
from stalwart.client import Experiment


def test_a_trials_frame_holds_what_its_reports_hold(finished: Experiment) -> None:
    (trial,) = finished.trials()
    reports = list(trial.metrics("validation"))
    frame = trial.metrics_dataframe("validation")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["steps_completed"]) == [r.total_batches for r in reports]
    assert list(frame["loss"]) == [r.metrics["validation_metrics"]["loss"] for r in reports]
    assert list(frame["trial_id"]) == [trial.id] * len(reports)
    assert str(frame["report_time"].dtype).startswith("datetime64")
    assert list(frame["report_time"]) == [pd.Timestamp(r.end_time) for r in reports]


def test_polars_and_arrow_and_the_experiment_frame(finished: Experiment) -> None:
    (trial,) = finished.trials()
    steps = [r.total_batches for r in trial.metrics("training")]
    polars_frame = finished.metrics_dataframe(library="polars")
    assert isinstance(polars_frame, pl.DataFrame)
    assert polars_frame["steps_completed"].to_list() == steps
    assert polars_frame["trial_id"].to_list() == [trial.id] * len(steps)
    table = trial.metrics_dataframe(library="arrow")
    assert isinstance(table, pa.Table)
    assert table.column("steps_completed").to_pylist() == steps


def test_a_missing_library_or_group_is_a_clear_error(
    finished: Experiment, monkeypatch: pytest.MonkeyPatch
) -> None:
    (trial,) = finished.trials()
    monkeypatch.setitem(sys.modules, "polars", None)  # what `import polars` meets when absent
    with pytest.raises(errors.InvalidArgumentError, match="need the polars package") as found:
        trial.metrics_dataframe(library="polars")
    assert found.value.hint == "pip install polars pyarrow"
    with pytest.raises(errors.InvalidArgumentError, match="unknown DataFrame library"):
        trial.metrics_dataframe(library="excel")  # type: ignore[arg-type]
    assert len(trial.metrics_dataframe("no-such-group")) == 0
