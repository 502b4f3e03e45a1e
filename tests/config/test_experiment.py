"""The experiment config: accepted forms, every problem reported with path and line, defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stalwart.config import ExperimentConfig, load_experiment_config, validate_experiment
from stalwart.config.hyperparameters import (
    CategoricalHyperparameter,
    ConstHyperparameter,
    LogHyperparameter,
)
from stalwart.config.loader import parse_yaml
from stalwart.errors import ConfigError

MINIMAL = """\
entrypoint: python3 train.py
searcher:
  name: single
  metric: loss
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_experiment_config(parse_yaml(text, "exp.yaml"))
    return info.value.problems


def defaulted(text: str) -> dict[str, Any]:
    return load_experiment_config(parse_yaml(text, "exp.yaml")).config.to_dict()


def test_minimal_config_gets_determined_defaults() -> None:
    cfg = defaulted(MINIMAL)
    assert cfg["max_restarts"] == 5
    assert cfg["scheduling_unit"] == 100
    assert cfg["records_per_epoch"] == 0
    assert cfg["checkpoint_policy"] == "best"
    assert cfg["perform_initial_validation"] is False
    assert cfg["min_validation_period"] == {"batches": 0}
    assert cfg["min_checkpoint_period"] == {"batches": 0}
    assert cfg["labels"] == []
    assert cfg["bind_mounts"] == []
    assert cfg["hyperparameters"] == {}
    assert cfg["searcher"]["smaller_is_better"] is True
    assert cfg["resources"]["slots_per_trial"] == 1
    assert cfg["debug"] is False
    names = [p["name"] for p in cfg["log_policies"]]
    assert any("OOM" in n.upper() for n in names)
    assert any("ECC" in n.upper() for n in names)


def test_explicit_null_means_default() -> None:
    cfg = defaulted(MINIMAL + "max_restarts: null\nresources:\n  slots_per_trial: null\n")
    assert cfg["max_restarts"] == 5
    assert cfg["resources"]["slots_per_trial"] == 1


def test_adaptive_asha_defaults() -> None:
    cfg = defaulted(
        "entrypoint: python3 train.py\n"
        "searcher:\n  name: adaptive_asha\n  metric: acc\n  smaller_is_better: false\n"
        "  max_trials: 10\n  time_metric: batches\n  max_time: 1000\n"
    )
    s = cfg["searcher"]
    assert (s["mode"], s["max_rungs"], s["divisor"], s["max_concurrent_trials"]) == (
        "standard",
        5,
        4.0,
        16,
    )
    assert s["bracket_rungs"] == []
    assert s["smaller_is_better"] is False


def test_entrypoint_as_string_or_list() -> None:
    assert defaulted(MINIMAL)["entrypoint"] == "python3 train.py"
    listed = MINIMAL.replace("python3 train.py", "[python3, train.py]")
    assert defaulted(listed)["entrypoint"] == ["python3", "train.py"]


def test_hyperparameter_forms() -> None:
    loaded = load_experiment_config(
        parse_yaml(
            MINIMAL + "hyperparameters:\n  global_batch_size: 64\n  layers: [64, 32]\n"
            "  optimizer:\n    name:\n      type: categorical\n      vals: [sgd, adam]\n"
            "    lr:\n      type: log\n      minval: -5\n      maxval: -1\n      base: 10\n"
        )
    )
    hps = loaded.config.hyperparameters
    assert hps["global_batch_size"] == ConstHyperparameter(type="const", val=64)
    assert hps["layers"] == ConstHyperparameter(type="const", val=[64, 32])
    group = hps["optimizer"]
    assert isinstance(group, dict)
    assert isinstance(group["name"], CategoricalHyperparameter)
    assert isinstance(group["lr"], LogHyperparameter)
    dumped = loaded.config.to_dict()["hyperparameters"]
    assert dumped["global_batch_size"] == {"type": "const", "val": 64}
    assert dumped["optimizer"]["lr"]["type"] == "log"


def test_every_problem_at_once_with_paths_and_lines() -> None:
    problems = problems_of(
        "entrypoint: python3 train.py\n"  # 1
        "nmae: typo\n"  # 2
        "searcher:\n"  # 3
        "  name: random\n"  # 4
        "  metric: loss\n"  # 5
        "  max_trials: 0\n"  # 6
        "resources:\n"  # 7
        "  priority: 100\n"  # 8
        "max_restarts: many\n"  # 9
    )
    assert "<config>.nmae (line 2): unknown key 'nmae'; did you mean 'name'?" in problems
    assert "<config>.searcher.max_trials (line 6): must be >= 1 (got 0)" in problems
    assert any(
        p.startswith("<config>.resources.priority (line 8): must be <= 99") for p in problems
    )
    assert "<config>.max_restarts (line 9): must be an integer (got 'many')" in problems
    assert len(problems) == 4


def test_nested_unknown_key_suggests_sibling() -> None:
    problems = problems_of(MINIMAL + "resources:\n  slots_per_trail: 2\n")
    assert problems == [
        "<config>.resources.slots_per_trail (line 6): unknown key 'slots_per_trail'; "
        "did you mean 'slots_per_trial'?"
    ]


def test_unknown_key_inside_a_union_variant_suggests_that_variants_fields() -> None:
    problems = problems_of(MINIMAL + "checkpoint_storage:\n  type: s3\n  buckt: b\n")
    assert any("unknown key 'buckt'; did you mean 'bucket'?" in p for p in problems)


def test_unknown_searcher_name_suggests() -> None:
    (problem,) = problems_of("entrypoint: x\nsearcher:\n  name: randm\n  metric: loss\n")
    assert problem.startswith("<config>.searcher (line 2): unknown name 'randm'")
    assert "did you mean 'random'?" in problem


@pytest.mark.parametrize(
    ("name", "replacement"),
    [
        ("pbt", "adaptive_asha"),
        ("custom", "adaptive_asha"),
        ("sync_halving", "async_halving"),
        ("adaptive", "adaptive_asha"),
        ("adaptive_simple", "adaptive_asha"),
    ],
)
def test_removed_searchers_say_what_to_use(name: str, replacement: str) -> None:
    problems = problems_of(f"entrypoint: x\nsearcher:\n  name: {name}\n  metric: loss\n")
    assert len(problems) == 1
    assert problems[0].startswith("<config>.searcher.name (line 3):")
    assert replacement in problems[0]


def test_legacy_max_length_is_accepted_with_a_warning() -> None:
    loaded = load_experiment_config(
        parse_yaml(
            "entrypoint: x\nsearcher:\n  name: async_halving\n  metric: loss\n"
            "  max_trials: 4\n  num_rungs: 3\n  max_length:\n    batches: 1000\n"
        )
    )
    assert loaded.config.searcher.max_length is not None
    assert any("max_length is deprecated" in w and "(line 7)" in w for w in loaded.warnings)


def test_asha_needs_a_length() -> None:
    problems = problems_of(
        "entrypoint: x\nsearcher:\n  name: adaptive_asha\n  metric: loss\n  max_trials: 4\n"
    )
    assert problems == [
        "<config>.searcher.max_time (line 2): adaptive_asha needs max_time and time_metric "
        "(how long trials train, in units of a metric they report), or the legacy max_length"
    ]


def test_grid_needs_counts_on_numeric_hyperparameters() -> None:
    problems = problems_of(
        "entrypoint: x\nsearcher:\n  name: grid\n  metric: loss\n"
        "hyperparameters:\n  lr:\n    type: double\n    minval: 0.1\n    maxval: 1.0\n"
        "  opt:\n    m:\n      type: int\n      minval: 1\n      maxval: 3\n      count: 3\n"
    )
    assert len(problems) == 1
    assert problems[0].startswith("<config>.hyperparameters.lr.count (line 6): the grid searcher")


def test_bad_hyperparameters() -> None:
    problems = problems_of(
        MINIMAL + "hyperparameters:\n  a:\n    type: float\n    minval: 1\n"
        "  b:\n    type: int\n    minval: 5\n    maxval: 1\n"
        "  c:\n    type: categorical\n    vals: []\n"
    )
    assert any(
        p.startswith("<config>.hyperparameters.a (line 6): unknown hyperparameter type 'float'")
        for p in problems
    )
    assert "<config>.hyperparameters.b (line 9): minval (5) must be less than maxval (1)" in (
        problems
    )
    assert any(
        p.startswith("<config>.hyperparameters.c.vals (line 15): must have at least 1")
        for p in problems
    )


def test_strict_types_like_determineds_schema() -> None:
    problems = problems_of(MINIMAL + "debug: 1\nrecords_per_epoch: '100'\n")
    assert "<config>.debug (line 5): must be true or false (got 1)" in problems
    assert "<config>.records_per_epoch (line 6): must be an integer (got '100')" in problems


def test_missing_required_fields() -> None:
    problems = problems_of("searcher:\n  name: random\n")
    assert "<config>.searcher.metric (line 1): required, but not set" in problems
    assert "<config>.searcher.max_trials (line 1): required, but not set" in problems


def test_entrypoint_is_required() -> None:
    problems = problems_of("searcher:\n  name: single\n  metric: loss\n")
    assert problems[0].startswith("<config>.entrypoint: required")


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="must be a mapping"):
        validate_experiment(["a"])


def test_slots_per_trial_above_max_slots() -> None:
    problems = problems_of(MINIMAL + "resources:\n  slots_per_trial: 8\n  max_slots: 4\n")
    assert problems[0].startswith("<config>.resources.slots_per_trial (line 6)")


def test_defaulted_config_round_trips() -> None:
    cfg = load_experiment_config(parse_yaml(MINIMAL)).config
    again = ExperimentConfig.model_validate(cfg.to_dict())
    assert again == cfg


def test_examples_are_valid() -> None:
    examples = sorted((Path(__file__).parents[2] / "examples").glob("*/*.yaml"))
    assert len(examples) >= 5
    for path in examples:
        load_experiment_config(path)
