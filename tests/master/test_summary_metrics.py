"""``summaryMetrics`` follows Determined's ``calculateNewSummaryMetrics`` rules (the compat test
``tests/compat/test_det_harness_calls.py`` reads it through the official SDK)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from stalwart.master.db.tables import Trial
from stalwart.master.services.summary_metrics import summarize
from stalwart.master.services.tasks import start_allocation
from tests.master.test_allocations_api import make_trial, master_state
from tests.master.test_checkpoints_api import add_metrics


def test_numbers_keep_min_max_sum_mean_count_and_last() -> None:
    summary = summarize([("training", {"loss": 2}), ("training", {"loss": 1.0})])
    assert summary == {
        "avg_metrics": {
            "loss": {
                "type": "number",
                "min": 1.0,
                "max": 2.0,
                "sum": 3.0,
                "mean": 1.5,
                "count": 2,
                "last": 1.0,
            }
        }
    }


def test_non_finite_values_are_numbers_written_as_strings() -> None:
    summary = summarize([("validation", {"x": "-Infinity"}), ("validation", {"x": 1})])
    x = summary["validation_metrics"]["x"]
    assert x["type"] == "number"
    assert (x["min"], x["max"], x["sum"], x["count"]) == ("-Infinity", 1.0, "-Infinity", 2)
    # NaN wins min and max whatever the order, as Go's math.Min / math.Max
    nan = summarize([("training", {"y": 1}), ("training", {"y": "NaN"})])["avg_metrics"]["y"]
    assert (nan["min"], nan["max"], nan["last"]) == ("NaN", "NaN", "NaN")


def test_a_type_change_makes_a_string_and_missing_metrics_last_null() -> None:
    summary = summarize(
        [
            ("eval", {"a": 1, "b": "2026-01-02T03:04:05Z", "c": [1], "d": {"k": 1}}),
            ("eval", {"a": "text"}),
        ]
    )
    group = summary["eval"]  # a custom group keeps its own name
    assert group["a"] == {"type": "string", "last": "text"}
    assert group["b"] == {"type": "date", "last": None}
    assert group["c"] == {"type": "array", "last": None}
    assert group["d"] == {"type": "object", "last": None}


def test_a_trials_summary_follows_new_and_archived_reports(
    client: TestClient, admin: dict[str, str]
) -> None:
    state = master_state(client)
    env = make_trial(client, state, admin)

    def summary() -> Any:
        answer = client.get(f"/api/v1/trials/{env.trial_id}", headers=admin).json()
        return answer["trial"]["summaryMetrics"]

    assert summary() is None  # no reports yet
    add_metrics(state, env.trial_id, "training", 1, loss=4.0)
    add_metrics(state, env.trial_id, "training", 2, loss=2.0)
    assert summary()["avg_metrics"]["loss"]["count"] == 2
    add_metrics(state, env.trial_id, "training", 3, loss=1.0)  # read again: not a stale copy
    assert summary()["avg_metrics"]["loss"]["count"] == 3
    with state.sessions() as session:  # a restarted run: its first report rolls back
        trial = session.get(Trial, env.trial_id)
        assert trial is not None
        start_allocation(session, trial.task_id, slots=1)
        session.commit()
    add_metrics(state, env.trial_id, "training", 2, loss=3.0)  # archives steps 2 and 3
    loss = summary()["avg_metrics"]["loss"]
    assert (loss["count"], loss["last"], loss["min"], loss["max"]) == (2, 3.0, 3.0, 4.0)
