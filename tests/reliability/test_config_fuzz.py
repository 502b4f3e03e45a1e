"""Hypothesis fuzzes the experiment-config loader: bad input is a ConfigError naming where.

Contract (what ``stalwart config check``, ``det e create`` and the master rely on): for any YAML
text, any JSON-like value, and any valid config with one subtree replaced by anything, loading
either succeeds or raises :class:`~stalwart.errors.ConfigError`, never another exception; and
every problem it lists says where: a ``<config>...`` path, or a YAML line for text that does not
parse. Examples are derandomized so CI sees the same inputs every run.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stalwart.config import DefaultsLayers, merge_experiment_layers, validate_experiment
from stalwart.config.load import load_experiment_config
from stalwart.config.loader import parse_yaml
from stalwart.errors import ConfigError

FUZZ = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

VALID: dict[str, Any] = {
    "name": "fuzz",
    "entrypoint": "python3 train.py",
    "resources": {"slots_per_trial": 1},
    "hyperparameters": {
        "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
        "layers": {"type": "int", "minval": 1, "maxval": 4},
        "act": {"type": "categorical", "vals": ["relu", "tanh"]},
        "fixed": 3,
    },
    "searcher": {
        "name": "adaptive_asha",
        "metric": "loss",
        "max_trials": 4,
        "max_length": {"batches": 100},
    },
    "checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp/ckpt"},
    "bind_mounts": [{"host_path": "/data", "container_path": "/data"}],
    "environment": {"image": "python:3.11", "environment_variables": ["A=1"]},
    "max_restarts": 2,
    "min_validation_period": {"batches": 10},
}

KEYS = st.sampled_from(
    [*VALID, "type", "name", "minval", "maxval", "vals", "batches", "epochs", "records"]
) | st.text(max_size=8)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # nan and infinities included
    | st.text(max_size=20)
    | st.sampled_from(["", "-", "1e400", "single", "grid", "log", "int", "shared_fs", "0"])
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=20,
)


def _problems_say_where(error: ConfigError) -> None:
    assert error.problems, str(error)
    for problem in error.problems:
        assert problem.startswith(("<config>", "<template>")) or "line " in problem, problem


def _validate(data: Any) -> None:
    try:
        validate_experiment(data)
    except ConfigError as error:
        _problems_say_where(error)


def _merge_and_validate(data: Any, layers: DefaultsLayers | None = None) -> None:
    try:
        validate_experiment(merge_experiment_layers(data, layers))
    except ConfigError as error:
        _problems_say_where(error)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (keys and indices), the root included."""
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def test_the_valid_base_config_loads() -> None:
    searcher = validate_experiment(merge_experiment_layers(VALID)).config.searcher
    assert getattr(searcher, "max_trials", None) == 4


@FUZZ
@given(text=st.text(max_size=300))
@example(text="<<")  # found by this test: a bare merge key composes but cannot be constructed
def test_any_text_parses_or_is_a_config_error_with_a_line(text: str) -> None:
    try:
        doc = parse_yaml(text, "fuzz.yaml")
    except ConfigError as error:
        _problems_say_where(error)
        return
    try:
        load_experiment_config(doc)
    except ConfigError as error:
        _problems_say_where(error)


@FUZZ
@given(value=VALUES)
def test_any_yaml_value_loads_or_is_a_config_error_with_a_path(value: Any) -> None:
    text = yaml.safe_dump(value, allow_unicode=True)
    try:
        load_experiment_config(parse_yaml(text, "fuzz.yaml"))
    except ConfigError as error:
        _problems_say_where(error)


@FUZZ
@given(value=VALUES)
def test_any_json_value_validates_or_is_a_config_error_with_a_path(value: Any) -> None:
    _validate(value)


@FUZZ
@given(data=st.data(), new=VALUES)
def test_a_valid_config_with_any_subtree_replaced_is_loaded_or_refused_with_a_path(
    data: st.DataObject, new: Any
) -> None:
    path = data.draw(st.sampled_from(_paths(VALID)), label="path")
    _merge_and_validate(_replace(VALID, path, new))


@FUZZ
@given(data=st.data(), new=VALUES)
def test_a_key_added_anywhere_is_loaded_or_refused_with_a_path(
    data: st.DataObject, new: Any
) -> None:
    dicts = [p for p in _paths(VALID) if isinstance(_get(VALID, p), dict)]
    path = data.draw(st.sampled_from(dicts), label="path")
    key = data.draw(KEYS, label="key")
    target = _get(VALID, path)
    _merge_and_validate(_replace(VALID, path, {**target, key: new}))


@FUZZ
@given(template=VALUES, tcd=VALUES)
def test_any_defaults_layers_merge_or_are_refused_with_a_path(template: Any, tcd: Any) -> None:
    layers = DefaultsLayers(template=template, master_tcd=tcd if isinstance(tcd, dict) else None)
    _merge_and_validate(VALID, layers)


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def test_special_floats_are_refused_with_a_path() -> None:
    for bad in (math.nan, math.inf):
        config = _replace(VALID, ("searcher", "max_trials"), bad)
        try:
            validate_experiment(merge_experiment_layers(config))
        except ConfigError as error:
            _problems_say_where(error)
            assert any("searcher.max_trials" in p for p in error.problems), error.problems  # noqa: PT017
        else:
            raise AssertionError(f"max_trials: {bad} was accepted")
