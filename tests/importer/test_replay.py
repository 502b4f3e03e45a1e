"""The replay of a live search (pure logic): which trials bind to which ``Create``, what the
searcher has left to create, and why a search cannot be replayed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from stalwart.config import ExperimentConfig
from stalwart.master.importer.history import stalwart_config
from stalwart.master.importer.replay import ReplayError, ReplayTrial, Validation, replay
from stalwart.master.searcher.actions import Create
from stalwart.master.searcher.factory import make_searcher
from tests.importer.seed import T0, _config

MINUTE = dt.timedelta(minutes=1)


def _experiment(searcher: dict[str, Any], **hyperparameters: Any) -> ExperimentConfig:
    config = _config("replayed", searcher, Path("/tmp/det-checkpoints"))
    if hyperparameters:
        config["hyperparameters"] = hyperparameters
    return ExperimentConfig.model_validate(stalwart_config(config)[0])


GRID = _experiment(
    {"name": "grid", "max_concurrent_trials": 2, "max_length": {"batches": 100}},
    lr={"type": "categorical", "vals": [0.1, 0.01, 0.001]},
)


def _grid_points() -> list[dict[str, Any]]:
    """The grid points in the order Stalwart's grid search creates them."""
    searcher = make_searcher(GRID)
    first = searcher.initial_actions()
    creates = [a for a in first if isinstance(a, Create)]
    creates += [a for a in searcher.on_trial_exited(creates[0].request_id) if isinstance(a, Create)]
    return [c.hparams for c in creates]


def test_a_live_grid_search_binds_its_trials_and_leaves_the_rest_of_the_grid() -> None:
    points = _grid_points()
    trials = [
        ReplayTrial(1, "COMPLETED", T0 + 10 * MINUTE, points[0]),
        ReplayTrial(2, "PAUSED", None, points[1]),
    ]
    result = replay(GRID, trials, [])
    assert set(result.requests) == {1, 2}
    assert [c.hparams for c in result.creates] == [points[2]]  # created paused at import
    assert result.stopped == set()
    live = {row[0] for row in result.snapshot["trials"]}  # live trials only have a row
    assert live == {result.requests[2], result.creates[0].request_id}


def test_a_grid_point_out_of_place_is_not_replayed() -> None:
    points = _grid_points()
    trials = [ReplayTrial(1, "PAUSED", None, points[2]), ReplayTrial(2, "PAUSED", None, points[0])]
    with pytest.raises(ReplayError, match="grid point"):
        replay(GRID, trials, [])


def test_more_trials_than_the_searcher_creates_are_not_replayed() -> None:
    config = _experiment(
        {"name": "random", "max_trials": 2, "max_concurrent_trials": 2, "max_length": 100}
    )
    trials = [ReplayTrial(n, "PAUSED", None) for n in (1, 2, 3)]
    with pytest.raises(ReplayError, match="fewer trials than the 3 imported"):
        replay(config, trials, [])


def test_a_search_with_nothing_left_to_run_is_not_replayed() -> None:
    config = _experiment(
        {"name": "random", "max_trials": 1, "max_concurrent_trials": 1, "max_length": 100}
    )
    with pytest.raises(ReplayError, match="nothing left to run"):
        replay(config, [ReplayTrial(1, "COMPLETED", T0)], [])


def test_a_running_trial_the_searcher_stops_comes_over_completed() -> None:
    """ASHA (one bracket, rungs at 100 and 400): the second trial ranks below the first at the
    first rung; Stalwart's searcher stops it, so it is imported COMPLETED and its replacement
    is bound to the next trial."""
    config = _experiment(
        {
            "name": "adaptive_asha",
            "max_length": {"batches": 400},
            "max_trials": 6,
            "max_rungs": 5,
            "divisor": 4,
            "mode": "aggressive",
            "bracket_rungs": [],
            "max_concurrent_trials": 2,
            "stop_once": False,
        }
    )
    trials = [ReplayTrial(1, "PAUSED", None), ReplayTrial(2, "PAUSED", None)]
    validations = [
        Validation(1, T0 + MINUTE, 10, 100, {"validation_loss": 0.1}),
        Validation(2, T0 + 2 * MINUTE, 11, 100, {"validation_loss": 0.9}),
    ]
    result = replay(config, trials, validations)
    assert result.stopped == {2}
    assert len(result.creates) == 1  # the stopped trial's replacement


def test_a_validation_without_the_searcher_metric_is_not_replayed() -> None:
    config = _experiment(
        {
            "name": "adaptive_asha",
            "max_length": {"batches": 400},
            "max_trials": 2,
            "max_concurrent_trials": 2,
        }
    )
    trials = [ReplayTrial(1, "PAUSED", None)]
    with pytest.raises(ReplayError, match="searcher metric"):
        replay(config, trials, [Validation(1, T0, 1, 100, {"accuracy": 0.5})])
