"""make_searcher: the config's searcher, seeded from the experiment seed."""

from __future__ import annotations

import pytest

from stalwart.master.searcher import (
    AdaptiveASHASearch,
    AsyncHalvingSearch,
    Create,
    GridSearch,
    RandomSearch,
    SingleSearch,
    make_searcher,
)
from stalwart.master.searcher.actions import Shutdown, Stop, action_to_dict
from stalwart.master.searcher.factory import searcher_class
from tests.master.searcher.sim import make_config

ASHA = {"metric": "loss", "time_metric": "batches", "max_time": 10, "max_trials": 4}


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ({"name": "single", "metric": "loss"}, SingleSearch),
        ({"name": "random", "metric": "loss", "max_trials": 3}, RandomSearch),
        ({"name": "grid", "metric": "loss"}, GridSearch),
        ({"name": "async_halving", "num_rungs": 2, **ASHA}, AsyncHalvingSearch),
        ({"name": "adaptive_asha", **ASHA}, AdaptiveASHASearch),
    ],
)
def test_each_searcher_name(spec: dict[str, object], cls: type) -> None:
    config = make_config(spec, {"a": 1})
    searcher = make_searcher(config)
    assert type(searcher) is cls
    assert searcher_class(config) is cls
    # only ASHA acts on a validation before the trial exits (it may stop the trial there)
    assert searcher.reacts_to_validations() == (cls in (AsyncHalvingSearch, AdaptiveASHASearch))
    assert searcher.name == spec["name"]
    actions = searcher.initial_actions()
    assert actions
    assert all(isinstance(a, Create) and a.hparams == {"a": 1} for a in actions)


def test_seed_comes_from_the_config_or_the_argument() -> None:
    config = make_config(
        {"name": "single", "metric": "loss"},
        {"a": {"type": "int", "minval": 0, "maxval": 10**9}},
        11,
    )
    [a] = make_searcher(config).initial_actions()
    [b] = make_searcher(config, seed=11).initial_actions()
    [c] = make_searcher(config, seed=12).initial_actions()
    assert a == b != c
    unseeded = config.model_copy(
        update={
            "reproducibility": config.reproducibility.model_copy(update={"experiment_seed": None})
        }
    )
    with pytest.raises(ValueError, match="experiment_seed"):
        make_searcher(unseeded)


def test_asha_without_a_length_is_rejected() -> None:
    config = make_config({"name": "single", "metric": "loss"}, {})
    from stalwart.config.searcher import AsyncHalvingSearcher

    bare = AsyncHalvingSearcher(name="async_halving", metric="loss", num_rungs=2, max_trials=2)
    with pytest.raises(ValueError, match="max_time and time_metric"):
        make_searcher(config.model_copy(update={"searcher": bare}))


def test_action_dicts() -> None:
    assert action_to_dict(Create("r", {"a": 1}, 5)) == {
        "type": "create",
        "request_id": "r",
        "hparams": {"a": 1},
        "trial_seed": 5,
    }
    assert action_to_dict(Stop("r")) == {"type": "stop", "request_id": "r"}
    assert action_to_dict(Shutdown(failure=True)) == {
        "type": "shutdown",
        "cancel": False,
        "failure": True,
    }
